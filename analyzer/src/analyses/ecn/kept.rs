//! What the ECN analysis keeps in each flow's entry of the analyses' flows table (a leaf: the
//! table holds it, the analysis reads it through the table).

use crate::analyses::keys::Place;

/// Marking of one flow's data packets and CNPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowMarking {
    pub data: u64,
    pub data_not_ect: u64,
    /// Data packets whose DSCP is not the expected RoCE DSCP.
    pub data_other_dscp: u64,
    pub cnps: u64,
    pub cnp_other_dscp: u64,
    /// A DSCP seen on data other than the expected one (the first such).
    pub seen_data_dscp: Option<u8>,
    pub seen_cnp_dscp: Option<u8>,
    /// The index of this flow's pair in [`Ecn::pairs`] (for its data: source → destination;
    /// for its CNPs: destination → source), once known: one hash lookup per record, not two.
    pub(super) data_pair: Place,
    pub(super) cnp_pair: Place,
}
