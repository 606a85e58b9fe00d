//! The offline path: capture files → frames → the pipeline (engine and analyses).

use std::path::Path;

use analyzer_common::PacketSummary;
use analyzer_common::wire::cm;

use crate::capture::input::InputSpec;
use crate::capture::{CaptureError, Truncation, pcap};
use crate::engine::{DropReason, FrameMeta};
use crate::frames;
use crate::pipeline::Pipeline;

/// Reads every input into one run. A truncated last record ends that input, marks the
/// run partial and is returned; any other error stops the analysis. `progress` gets the
/// input being read and the bytes read so far over all inputs.
pub fn analyze_files(
    run: &mut Pipeline,
    inputs: &[InputSpec],
    mut progress: impl FnMut(&Path, u64),
) -> Result<Vec<Truncation>, CaptureError> {
    let mut truncations = Vec::new();
    let mut summary = PacketSummary::zeroed();
    let mut done = 0u64;
    for input in inputs {
        let source = run.engine.add_source("pcap", &input.path.display().to_string(), &input.label);
        let outcome = pcap::read_file(
            &input.path,
            |rec| {
                frames::decode(rec.link, rec.data, rec.orig_len, &mut summary);
                run.observe(FrameMeta { ts_ns: rec.ts_ns, source }, &summary);
                if cm::is_carrier(summary.opcode, summary.dst_qp)
                    && let Some(mad) = frames::bytes_at(rec.link, rec.data, summary.payload_off as usize, cm::BYTES)
                {
                    run.observe_cm(&summary.src_ip, &summary.dst_ip, mad);
                }
            },
            |bytes| progress(&input.path, done + bytes),
        )?;
        done += outcome.bytes;
        if outcome.skipped > 0 {
            run.engine.count_drop(DropReason::UnreadLinkType, outcome.skipped);
            run.engine.visibility.skipped_linktypes.extend(&outcome.skipped_linktypes);
        }
        if let Some(t) = outcome.truncated {
            run.engine.partial = true;
            run.engine.count_drop(DropReason::TruncatedRecord, 1);
            truncations.push(t);
        }
    }
    run.engine.settle_span();
    Ok(truncations)
}
