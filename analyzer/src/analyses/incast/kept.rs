//! What the incast analysis keeps in each flow's entry of the analyses' flows table.

use crate::analyses::keys::Place;

/// What a flow keeps of the incast analysis (in the analyses' flows table): its destination's
/// place, its sender's place there, and the generation of the sender list it was last added
/// to, so that a frame of a flow already listed in the current tally costs no set lookup.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kept {
    pub(super) dest: Place,
    pub(super) sender: Place,
    /// The generation plus one (0: never listed).
    pub(super) listed: u64,
}
