-- Top destinations by incast time across all hosts: the episodes that ended, per destination.
SELECT dst, sum(duration_ns) AS incast_ns, count() AS episodes, max(peak_senders) AS peak_senders,
       sum(bytes) AS bytes, groupUniqArray(host) AS hosts
FROM roce.events
WHERE kind = 'incast_episode'
GROUP BY dst
ORDER BY incast_ns DESC, dst
LIMIT 20
