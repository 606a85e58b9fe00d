-- How long rows are kept, on a server with TTL (ClickHouse 19.6 and later; Debian 12's 18.16
-- has none: drop old partitions there, `ALTER TABLE roce.flows DROP PARTITION '2026-11-01'`).
-- 30 days here; change the interval to keep more or less. Apply after schema.sql:
--   clickhouse-client --multiquery < deploy/clickhouse/ttl.sql
ALTER TABLE roce.flows MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.pfc MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.events MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.findings MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.hops MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.messages MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.message_pairs MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.samples MODIFY TTL date + INTERVAL 30 DAY;
ALTER TABLE roce.intervals MODIFY TTL date + INTERVAL 30 DAY;
