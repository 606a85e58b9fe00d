//! How the analyses keep state per key (address, flow, destination): bounded maps, places kept
//! in a flow's entry, items interned in the order first seen.

use rustc_hash::FxHashMap;

/// An address as the analyses key it: the 16-byte form and its IP version.
pub type Addr = ([u8; 16], u8);

/// The state an analysis keeps per key (flow, address pair, destination) is bounded: past
/// `cap` keys, a new key gets none and its frame is counted in `full` (the report's
/// `dropped.analysis_state_full`), as the kernel counts a full map.
pub(crate) fn bounded<'m, K: std::hash::Hash + Eq, V: Default>(
    map: &'m mut FxHashMap<K, V>,
    key: K,
    cap: usize,
    full: &mut u64,
) -> Option<&'m mut V> {
    if map.len() >= cap && !map.contains_key(&key) {
        *full += 1;
        return None;
    }
    Some(map.entry(key).or_default())
}

/// The FxHash of a value: the hash under which the analyses' tables of places find an item
/// through its own key ([`Interned`]; the RTT analysis' flows per host pair).
pub(crate) fn fx_hash<T: std::hash::Hash + ?Sized>(v: &T) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(v)
}

/// A place kept in a flow's entry (of an [`Interned`] item, of a destination's sender) or for
/// a flow index (its slot in [`flows::Flows`]), in four bytes where an `Option<u32>` takes
/// eight: the part of a flow's entry that a data record uses stays on two cache lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place(u32);

impl Default for Place {
    fn default() -> Self {
        Place(u32::MAX)
    }
}

impl Place {
    #[inline]
    pub(crate) fn get(self) -> Option<u32> {
        (self.0 != u32::MAX).then_some(self.0)
    }

    /// Keeps `p`, an index of a vector (never `u32::MAX`: no vector here holds 4 G items).
    #[inline]
    pub(crate) fn set(&mut self, p: u32) {
        debug_assert_ne!(p, u32::MAX);
        self.0 = p;
    }
}

/// Items in the order first seen, with an index by key, at most `cap` of them, never removed:
/// a flow keeps the place of its item (ECN pair, incast destination) in its entry of
/// [`flows::Flows`], so that its later records reach the item without a lookup. The index holds
/// the items' places only (4 bytes each; a map with a copy of each key took 10.75 MB for
/// 200 000 address pairs).
#[derive(Debug)]
pub(crate) struct Interned<K, V> {
    items: Vec<(K, V)>,
    index: hashbrown::HashTable<u32>,
}

impl<K, V> Default for Interned<K, V> {
    fn default() -> Self {
        Interned { items: Vec::new(), index: hashbrown::HashTable::new() }
    }
}

impl<K: std::hash::Hash + Eq + Copy, V: Default> Interned<K, V> {
    fn find(&self, key: &K) -> Option<u32> {
        self.index.find(fx_hash(key), |&i| self.items[i as usize].0 == *key).copied()
    }

    /// The item of `key` through the place `kept` (found, or added within `cap`, and kept
    /// there the first time); None at the cap, counted in `full`.
    pub(crate) fn place_mut(&mut self, key: K, kept: &mut Place, cap: usize, full: &mut u64) -> Option<&mut V> {
        let i = match kept.get() {
            Some(i) => i,
            None => {
                let i = match self.find(&key) {
                    Some(i) => i,
                    None if self.items.len() >= cap => {
                        *full += 1;
                        return None;
                    }
                    None => {
                        self.items.push((key, V::default()));
                        let i = (self.items.len() - 1) as u32;
                        let items = &self.items;
                        self.index.insert_unique(fx_hash(&key), i, |&j| fx_hash(&items[j as usize].0));
                        i
                    }
                };
                kept.set(i);
                i
            }
        };
        Some(&mut self.items[i as usize].1)
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.find(key).map(|i| &self.items[i as usize].1)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).map(|i| &mut self.items[i as usize].1)
    }

    /// The items, in the order first seen.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.items.iter_mut().map(|(_, v)| v)
    }

    /// In the order first seen.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.items.iter().map(|(k, v)| (k, v))
    }
}
