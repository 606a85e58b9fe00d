//! The frame's bytes read through bounds checks, and this CPU's scratch entry: the summary the
//! classifier fills and the word through which values are laundered.

use analyzer_common::FrameBytes;
use analyzer_common::classify::MAX_HEADER_OFFSET;
use analyzer_common::maps::Scratch;
use aya_ebpf::macros::map;
use aya_ebpf::maps::PerCpuArray;

/// The frame's summary and the `widen` slot ([`Scratch`]): one lookup per frame.
#[map]
pub(crate) static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// The frame, read through bounds checks against `data_end`.
pub(crate) struct Packet {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// This CPU's `Scratch::widen`.
    pub(crate) word: Word,
}

impl FrameBytes for Packet {
    #[inline(always)]
    fn read<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        if self.start + offset + N > self.end {
            return None;
        }
        // SAFETY: the N bytes at start + offset lie before data_end (checked above).
        Some(unsafe { core::ptr::read_unaligned((self.start + offset) as *const [u8; N]) })
    }

    /// Laundered ([`Word::launder`]), bounded again by the mask (every classifier offset is
    /// below MAX_HEADER_OFFSET).
    #[inline(always)]
    fn widen(&self, offset: usize) -> usize {
        (self.word.launder(offset as u64) as usize) & (MAX_HEADER_OFFSET - 1)
    }
}

/// This CPU's scratch word (`Scratch::widen`), through which values are laundered.
#[derive(Clone, Copy)]
pub(crate) struct Word(pub(crate) *mut u64);

impl Word {
    /// This CPU's word (None only if the scratch map had no entry, which it always has).
    #[inline(always)]
    pub(crate) fn get() -> Option<Word> {
        // SAFETY: a field of this CPU's scratch entry; only its address is taken.
        SCRATCH.get_ptr_mut(0).map(|p| Word(unsafe { core::ptr::addr_of_mut!((*p).widen) }))
    }

    /// `v` through map memory, which the verifier does not track: the value read back is an
    /// unknown scalar, so paths that computed different values go on as one (it checks what
    /// follows once, not once per value), and a range LLVM or the verifier kept is forgotten
    /// (a caller bounds it again with a mask).
    #[inline(always)]
    pub(crate) fn launder(self, v: u64) -> u64 {
        // SAFETY: this CPU's scratch word (a Word is made only from this CPU's scratch entry:
        // `get`, or the program's one lookup of it), used by this program run only: XDP runs
        // are not interrupted by another on their CPU.
        unsafe {
            core::ptr::write_volatile(self.0, v);
            core::ptr::read_volatile(self.0)
        }
    }
}
