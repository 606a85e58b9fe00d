//! The report's stable identifiers: finding codes, note codes and severities. Their serde names
//! are the v1 contract (`"go_back_n"`, `"no_roce"`, `"warning"`); everything else in the
//! program names them through these enums, so a code is declared once.

use serde::{Deserialize, Serialize};

/// How much a finding matters. Ordered: errors sort first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Error, Severity::Warning, Severity::Info];

    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// Declares a code enum with its serde names and `name()`, in one list.
macro_rules! codes {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }
    };
}

codes! {
    /// What a finding (audit or ECMP) is about.
    FindingCode {
        /// RoCE data not ECN-capable: switches cannot mark it, DCQCN cannot react.
        NotEct = "not_ect",
        RoceDscp = "roce_dscp",
        CnpDscp = "cnp_dscp",
        CeWithoutCnp = "ce_without_cnp",
        CnpWithoutCe = "cnp_without_ce",
        GoBackN = "go_back_n",
        Reordering = "reordering",
        PsnGap = "psn_gap",
        RnrRetry = "rnr_retry",
        Retransmission = "retransmission",
        RnrNak = "rnr_nak",
        NakError = "nak_error",
        ReadResponseGap = "read_response_gap",
        RttTimeout = "rtt_timeout",
        UplinkImbalance = "uplink_imbalance",
        EcmpPolarized = "ecmp_polarized",
        CrcSeed = "crc_seed",
        FewSourcePorts = "few_source_ports",
        ElephantFlows = "elephant_flows",
        /// Frames seen at one vantage point never reached the next.
        LossBetween = "loss_between",
        /// A flow kept its rate after CNPs.
        CnpIgnored = "cnp_ignored",
        /// A flow's rate came back slowly after CNPs.
        SlowRecovery = "slow_recovery",
        /// CNPs to a flow faster than its receiver's pacing allows.
        CnpStorm = "cnp_storm",
        /// The slowest messages overlapped one cause more than any other.
        TailDominatedBy = "tail_dominated_by",
        /// One edge of a ring runs well below the ring's median edge.
        RingStraggler = "ring_straggler",
        /// Most pause onsets of a sender and priority came without CE marks before them.
        PfcBeforeEcn = "pfc_before_ecn",
        /// A priority's pause frames per million data frames above `--pfc-rate-max`.
        PfcRateHigh = "pfc_rate_high",
        /// Sprayed flows whose receivers answered the reordering with PSN-sequence NAKs.
        SprayingWithoutOoo = "spraying_without_ooo",
        /// A hop marks CE from a queue shorter than `--kmin-min`: marks before congestion.
        EcnThresholdLow = "ecn_threshold_low",
    }
}

codes! {
    /// What a visibility note says the vantage point could not see (or what a merge could not
    /// combine).
    NoteCode {
        HardwareRoceBypass = "hardware_roce_bypass",
        NoRoce = "no_roce",
        NoPfc = "no_pfc",
        OneDirection = "one_direction",
        Malformed = "malformed",
        Partial = "partial",
        Checkpoint = "checkpoint",
        SnapCut = "snap_cut",
        CutCopies = "cut_copies",
        BthCut = "bth_cut",
        ListsCapped = "lists_capped",
        ImplausibleTimestamps = "implausible_timestamps",
        SkippedInterfaces = "skipped_interfaces",
        Mirrored = "mirrored",
        MatchedCopies = "matched_copies",
        SightingsEvicted = "sightings_evicted",
        PfcUnplaced = "pfc_unplaced",
        TimelineOff = "timeline_off",
        CongestionTreeNotMerged = "congestion_tree_not_merged",
        /// Older merges: incast episodes kept per report.
        IncastNotMerged = "incast_not_merged",
        /// Incast episodes joined from several reports: peaks are a lower bound.
        IncastJoined = "incast_joined",
        /// Incast episodes at a cut in time: the next part's first moments are in none.
        IncastCut = "incast_cut",
        RttNotMerged = "rtt_not_merged",
        /// Flows of reports that follow each other in time whose PSN state across the cut was
        /// not known (reports without `--edges`, or a head whose state did not settle).
        PsnNotStitched = "psn_not_stitched",
        /// Requests waiting at a cut in time, or ACKs without a request after one: samples
        /// answered across the cut are in no report.
        RttNotStitched = "rtt_not_stitched",
        EcmpPredictedNotMerged = "ecmp_predicted_not_merged",
        VantageNotMerged = "vantage_not_merged",
        FromExport = "from_export",
        FlowsFolded = "flows_folded",
        /// Older merges: DCQCN kept from a single report only.
        DcqcnNotMerged = "dcqcn_not_merged",
        /// DCQCN medians of flows or hosts judged in several reports (null in the merge).
        DcqcnMediansNotMerged = "dcqcn_medians_not_merged",
        /// Several reports judged CNPs, each on its own rate windows.
        DcqcnNotStitched = "dcqcn_not_stitched",
        /// Live: flows whose frames the kernel handled on more than one CPU.
        SeveralCpus = "several_cpus",
        /// Messages were sent but no completion of theirs was seen (one direction captured).
        NoCompletions = "no_completions",
        /// PSNs skipped here that the ACKs show delivered: the capture dropped frames.
        CaptureLoss = "capture_loss",
        MessagesNotMerged = "messages_not_merged",
        /// Marking series that miss frames before a report's first CE mark which one run
        /// would count (a report without `--edges`, or reports overlapping the first mark).
        MarkingNotMerged = "marking_not_merged",
        /// Sprayed flows whose late arrivals, NAKs or median displacement some report that saw
        /// them did not list.
        LoadBalancingNotMerged = "load_balancing_not_merged",
        /// CE/CNP timing of reports that overlap in time or carry no edges: pairs' answered,
        /// unanswered, covered and pending marks and the QPs' pacing are each report's.
        EcnNotStitched = "ecn_not_stitched",
        /// PFC senders paused in several reports whose onsets could not be judged against
        /// the marks before them as one run.
        EcnLeadNotMerged = "ecn_lead_not_merged",
        /// Flows with PSNs skipped before or at a cut that an ACK after it may cover.
        CaptureLossNotStitched = "capture_loss_not_stitched",
        /// CE marks seen, and one vantage point: a switch's thresholds need two.
        ThresholdsNeedTwoPoints = "thresholds_need_two_points",
        /// Export lines given up by a sink (a full disk, a full --export-buffer).
        ExportDropped = "export_dropped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_are_the_contract() {
        for c in FindingCode::ALL {
            assert_eq!(serde_json::to_string(c).unwrap(), format!("\"{}\"", c.name()));
        }
        for c in NoteCode::ALL {
            assert_eq!(serde_json::from_str::<NoteCode>(&format!("\"{}\"", c.name())).unwrap(), *c);
        }
        assert_eq!(serde_json::to_string(&Severity::Warning).unwrap(), "\"warning\"");
        assert!(Severity::Error < Severity::Warning && Severity::Warning < Severity::Info);
        // The human summary aligns severities in a column.
        assert_eq!(format!("[{:<7}] [{:>8}]", Severity::Error, FindingCode::PsnGap), "[error  ] [ psn_gap]");
    }
}
