-- The fleet's tables for `roce-analyzer --export-clickhouse URL`: one per kind of export line.
-- Every row names the agent that wrote it (host, label, interface), its interval (seq,
-- interval_end_ns, Unix ns) and the day it falls in (date, UTC), by which the tables are
-- partitioned. Apply with:
--   clickhouse-client --multiquery < deploy/clickhouse/schema.sql
-- Another database than `roce`: replace `roce.` here and pass --clickhouse-database; a table
-- prefix: rename the tables and pass --clickhouse-table-prefix. Rows expire by ttl.sql (on a
-- server that has TTL, 19.6 and later). Runs on Debian 12's clickhouse-server 18.16 and on
-- current ClickHouse alike (the tests run both).

CREATE DATABASE IF NOT EXISTS roce;

-- A flow whose counters moved in the interval: the deltas, and its totals (`total`: the flow
-- as the report lists it, JSON). `flow` is src>dst:udp_sport/dst_qp, as findings name flows.
CREATE TABLE IF NOT EXISTS roce.flows (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    flow String, src String, dst String, udp_sport UInt16, dst_qp UInt32,
    packets UInt64, bytes UInt64, ce UInt64, ack_req UInt64, fecn UInt64, becn UInt64, rtt_samples UInt64,
    total_packets UInt64, total_bytes UInt64, first_ns UInt64, last_ns UInt64,
    labels Array(String), total String
) ENGINE = MergeTree PARTITION BY date ORDER BY (flow, host, interval_end_ns);

-- A PFC sender (device:port when the topology names it, else its MAC) and priority (8: an
-- 802.3x PAUSE sender) that paused in the interval: deltas and totals.
CREATE TABLE IF NOT EXISTS roce.pfc (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    mac String, device String, port String, priority UInt8,
    frames UInt64, paused_ns UInt64, total_frames UInt64, total_paused_ns UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (device, port, priority, host, interval_end_ns);

-- An event that ended: kind storm (mac, device, priority), incast_episode (dst, senders,
-- peak_senders, bytes) or deadlock (priority, senders = the cycle); `body` is the event whole.
CREATE TABLE IF NOT EXISTS roce.events (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    kind String, start_ns UInt64, end_ns UInt64, duration_ns UInt64,
    dst String, mac String, device String, priority Int16,
    senders Array(String), peak_senders UInt32, bytes UInt64, body String
) ENGINE = MergeTree PARTITION BY date ORDER BY (kind, dst, start_ns);

-- A finding raised, final (changed by the run's end) or cleared; its flows as in roce.flows.
CREATE TABLE IF NOT EXISTS roce.findings (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    id String, state String, severity String, code String, message String,
    flows Array(String), flows_omitted UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (code, host, interval_end_ns);

-- Frames seen at one vantage point (label) that did not reach the next, in the interval.
CREATE TABLE IF NOT EXISTS roce.hops (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    from_label String, to_label String,
    frames_missing UInt64, frames_missing_total UInt64, frames_matched_total UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (from_label, to_label, host, interval_end_ns);

-- The messages' completion times at the interval's end (cumulative over the run); `body` is
-- the section whole (size classes, the tail explained, steadiness, rings).
CREATE TABLE IF NOT EXISTS roce.messages (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    completed UInt64, mct_p50_ns UInt64, mct_p99_ns UInt64, mct_p999_ns UInt64, mct_max_ns UInt64,
    body String
) ENGINE = MergeTree PARTITION BY date ORDER BY (host, interval_end_ns);

-- A host pair's messages at the interval's end (cumulative over the run), in a row when its
-- completed messages changed since its last; 0 for a goodput or an RTT not measured.
CREATE TABLE IF NOT EXISTS roce.message_pairs (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    src String, dst String, completed UInt64, bytes UInt64,
    mct_p50_ns UInt64, mct_p99_ns UInt64, mct_p999_ns UInt64, mct_max_ns UInt64,
    goodput_bps_p50 UInt64, min_rtt_ns UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (src, dst, host, interval_end_ns);

-- Trajectory samples (--trajectory-sample 1/one_in): the frames every agent samples alike, by
-- identity hash (`id`), with the time this agent saw them, their ECN bits and direction (0:
-- the source address sorts below the destination). Joined across agents: the hops between
-- collectors (queries/trajectory_hops.sql).
CREATE TABLE IF NOT EXISTS roce.samples (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    id UInt64, ts_ns UInt64, ecn UInt8, dir UInt8, one_in UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (id, host, label);

-- The interval itself: frames and drops in it, the capture's frames so far, its other lines.
CREATE TABLE IF NOT EXISTS roce.intervals (
    date Date, host String, label String, interface String, seq UInt64, interval_end_ns UInt64,
    kind String, start_ns UInt64, end_ns UInt64, is_final UInt8,
    frames UInt64, dropped UInt64, total_frames UInt64, lines UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (host, end_ns);
