-- ECMP imbalance per tier across collectors. Each collector (one per uplink, on the mirror of
-- that link) is labelled TIER:LINK (`--label leaf1:up1`, offline `-r leaf1:up1=FILE`); every
-- collector that reported an interval counts as a link of its tier, an idle one with 0 bytes.
-- Per tier: its links, the RoCE bytes they carried, the busiest link's bytes over the mean
-- (as the report's ecmp.observed.imbalance) and the idle links.
SELECT tier, count() AS links, sum(bytes) AS total_bytes, max(bytes) AS max_bytes,
       if(sum(bytes) = 0, 0, max(bytes) * count() / sum(bytes)) AS imbalance,
       arraySort(groupArrayIf(link, bytes = 0)) AS idle
FROM
(
    SELECT substring(label, 1, position(label, ':') - 1) AS tier, substring(label, position(label, ':') + 1) AS link,
           bytes
    FROM (SELECT DISTINCT label FROM roce.intervals WHERE position(label, ':') > 0 AND position(label, ',') = 0) AS links
    ANY LEFT JOIN (SELECT label, sum(bytes) AS bytes FROM roce.flows GROUP BY label) AS carried USING label
)
GROUP BY tier
HAVING links >= 2
ORDER BY imbalance DESC, tier
