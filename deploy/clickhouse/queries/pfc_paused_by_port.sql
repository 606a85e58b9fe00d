-- PFC paused time by device:port (the sender's MAC where no topology names it) and priority,
-- fleet-wide: the sum of every agent's per-interval deltas.
SELECT if(device = '', mac, device) AS sender, port, priority, sum(paused_ns) AS paused_ns,
       sum(frames) AS frames, groupUniqArray(host) AS hosts
FROM roce.pfc
GROUP BY sender, port, priority
ORDER BY paused_ns DESC, sender, port, priority
