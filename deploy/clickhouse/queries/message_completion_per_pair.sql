-- Message completion time per host pair across the fleet: each agent's latest row of a pair
-- (its rows are cumulative over its run), then per pair the agent that saw the most of its
-- messages complete (a sender-side agent and a mirror may both see a pair). Slowest first.
SELECT src, dst, max(done) AS completed, argMax(p99, done) AS p99_ns, argMax(p999, done) AS p999_ns,
       argMax(worst, done) AS max_ns, count() AS agents
FROM (
    SELECT host, label, src, dst, argMax(completed, interval_end_ns) AS done,
           argMax(mct_p99_ns, interval_end_ns) AS p99, argMax(mct_p999_ns, interval_end_ns) AS p999,
           argMax(mct_max_ns, interval_end_ns) AS worst
    FROM roce.message_pairs
    GROUP BY host, label, src, dst
)
GROUP BY src, dst
ORDER BY p999_ns DESC, src, dst
