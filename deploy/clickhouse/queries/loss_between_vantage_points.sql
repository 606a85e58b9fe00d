-- Frames seen at one vantage point that did not reach the next, per hop, across collectors.
SELECT from_label, to_label, sum(frames_missing) AS frames_missing,
       max(frames_matched_total) AS frames_matched, groupUniqArray(host) AS hosts
FROM roce.hops
GROUP BY from_label, to_label
ORDER BY frames_missing DESC, from_label, to_label
