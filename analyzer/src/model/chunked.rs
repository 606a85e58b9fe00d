//! A vector grown in chunks, for the flow tables (the engine's and the analyses'): 200 000
//! flows take room for no more than a chunk beyond them, nothing is copied when it grows (a
//! doubling vector holds both arrays meanwhile), and elements never move.

/// A vector grown in chunks of [`CHUNK`] elements: no doubling slack (a flow table of 200 000
/// flows would otherwise hold room for 262 144), and no copy of the whole when it grows.
#[derive(Debug)]
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

/// Elements per chunk of a [`Chunked`].
pub const CHUNK: usize = 4096;

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new(), len: 0 }
    }
}

impl<T> Chunked<T> {
    pub fn push(&mut self, v: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks.last_mut().expect("a chunk with room").push(v);
        self.len += 1;
    }

    #[inline]
    pub fn get(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    #[inline]
    pub fn get_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }

    /// The element at `i`, if there is one.
    #[inline]
    pub fn get_checked(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    /// Keeps the elements whose `keep` entry is true, in order, moving them down in place
    /// (no second copy of the whole: an agent folding flows does not double its memory).
    pub fn retain_in_place(&mut self, keep: &[bool]) {
        let mut to = 0;
        for (from, kept) in keep.iter().enumerate().take(self.len) {
            if *kept {
                if to != from {
                    self.swap_down(to, from);
                }
                to += 1;
            }
        }
        self.len = to;
        self.chunks.truncate(to.div_ceil(CHUNK));
        if let Some(last) = self.chunks.last_mut() {
            last.truncate(to - (to - 1) / CHUNK * CHUNK);
        }
    }

    /// Swaps elements `a` < `b`.
    fn swap_down(&mut self, a: usize, b: usize) {
        let (ca, cb) = (a / CHUNK, b / CHUNK);
        if ca == cb {
            self.chunks[ca].swap(a % CHUNK, b % CHUNK);
        } else {
            let (lo, hi) = self.chunks.split_at_mut(cb);
            std::mem::swap(&mut lo[ca][a % CHUNK], &mut hi[0][b % CHUNK]);
        }
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut c = Chunked::default();
        for v in iter {
            c.push(v);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_retain_keeps_order_across_chunks() {
        let n = CHUNK * 2 + 17;
        let mut c: Chunked<usize> = (0..n).collect();
        let keep: Vec<bool> = (0..n).map(|i| i % 3 != 0).collect();
        c.retain_in_place(&keep);
        let want: Vec<usize> = (0..n).filter(|i| i % 3 != 0).collect();
        assert_eq!(c.iter().copied().collect::<Vec<_>>(), want);
        assert_eq!(c.len(), want.len());
        c.push(7);
        assert_eq!(*c.get(want.len()), 7, "pushes go on after the kept ones");
        let none = vec![false; c.len()];
        c.retain_in_place(&none);
        assert!(c.is_empty() && c.iter().next().is_none());
        c.push(1);
        assert_eq!(*c.get(0), 1);
    }
}
