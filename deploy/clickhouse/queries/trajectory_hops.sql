-- Hops between collectors from their trajectory samples (--trajectory-sample): per pair of
-- agents (host/label) and direction (dir), the frames sampled at from_point that to_point saw
-- too (matched), those it did not (missing: sampled minus matched, over all of from_point's
-- samples of that direction), the CE marks added between, to's time minus from's less the
-- clocks' offset (p50, p99), and the offset: to's clock minus from's, half the difference of
-- the fastest frame each way (0 when frames went one way only: the latency then includes it).
-- The same estimate as `roce-analyzer merge` over the agents' exports.
SELECT from_point, to_point, dir, sampled, matched, sampled - matched AS missing, ce_between,
       p50_ns, p99_ns, clock_offset_ns
FROM
(
    SELECT pa AS from_point, pb AS to_point, tupleElement(h, 1) AS dir, tupleElement(h, 2) AS matched,
           tupleElement(h, 3) AS ce_between, tupleElement(h, 4) - off AS p50_ns,
           tupleElement(h, 5) - off AS p99_ns, off AS clock_offset_ns
    FROM
    (
        SELECT pa, pb, groupArray((da, matched, ce_between, med, p99, fastest, slowest)) AS dirs,
               if(length(dirs) = 2,
                  intDiv(if(tupleElement(dirs[1], 4) >= tupleElement(dirs[2], 4),
                            tupleElement(dirs[1], 6) + tupleElement(dirs[2], 7),
                            tupleElement(dirs[2], 6) + tupleElement(dirs[1], 7)), 2),
                  toInt64(0)) AS off
        FROM
        (
            SELECT pa, pb, da, count() AS matched, sum(ea != 3 AND eb = 3) AS ce_between,
                   toInt64(quantileExact(0.5)(toInt64(tb) - toInt64(ta))) AS med,
                   toInt64(quantileExact(0.99)(toInt64(tb) - toInt64(ta))) AS p99,
                   min(toInt64(tb) - toInt64(ta)) AS fastest, max(toInt64(tb) - toInt64(ta)) AS slowest
            FROM
            (
                SELECT concat(host, '/', label) AS pa, id, min(ts_ns) AS ta, argMin(ecn, ts_ns) AS ea,
                       argMin(dir, ts_ns) AS da
                FROM roce.samples GROUP BY pa, id
            ) AS a
            INNER JOIN
            (
                SELECT concat(host, '/', label) AS pb, id, min(ts_ns) AS tb, argMin(ecn, ts_ns) AS eb
                FROM roce.samples GROUP BY pb, id
            ) AS b USING id
            WHERE pa != pb
            GROUP BY pa, pb, da
        )
        GROUP BY pa, pb
    )
    ARRAY JOIN dirs AS h
    WHERE tupleElement(h, 4) - off >= 0
) AS hops
ANY LEFT JOIN
(
    SELECT concat(host, '/', label) AS from_point, dir, uniqExact(id) AS sampled
    FROM roce.samples GROUP BY from_point, dir
) AS sampled_at USING (from_point, dir)
ORDER BY from_point, to_point, dir
