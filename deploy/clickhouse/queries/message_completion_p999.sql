-- Message completion time per agent: p50, p99 and p99.9 at its latest interval (the messages
-- line is cumulative over the run). Per host pair: message_completion_per_pair.sql.
SELECT host, label, argMax(completed, interval_end_ns) AS completed,
       argMax(mct_p50_ns, interval_end_ns) AS p50_ns, argMax(mct_p99_ns, interval_end_ns) AS p99_ns,
       argMax(mct_p999_ns, interval_end_ns) AS p999_ns
FROM roce.messages
GROUP BY host, label
ORDER BY p999_ns DESC, host, label
