-- The flows behind each finding across hosts (raised or final, not cleared), with the bytes
-- each flow carried as the flows table has them.
SELECT code, flow, hosts, bytes
FROM
(
    SELECT code, flow, groupUniqArray(host) AS hosts
    FROM (SELECT code, host, arrayJoin(flows) AS flow FROM roce.findings WHERE state != 'cleared')
    GROUP BY code, flow
) AS behind
ANY LEFT JOIN (SELECT flow, sum(bytes) AS bytes FROM roce.flows GROUP BY flow) AS carried USING flow
ORDER BY code, flow
