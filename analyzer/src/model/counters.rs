//! Named counter sets (PSN anomalies, AETHs by syndrome): one array with one list of names,
//! summed, differenced and written through this one implementation. The kernel's state keeps
//! the same arrays (`analyzer_common::psn::PsnState`), so a new counter is one more index and
//! name there and nothing more here, in merge, in the metrics or in the live deltas.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The report names of a counter set, by index.
pub trait CounterNames {
    const NAMES: &'static [&'static str];
}

/// `N` counters named by `K`, written in JSON as an object `{name: value}` in index order.
pub struct Counters<K, const N: usize> {
    pub values: [u64; N],
    names: PhantomData<K>,
}

impl<K: CounterNames, const N: usize> Counters<K, N> {
    pub const fn new(values: [u64; N]) -> Self {
        Counters { values, names: PhantomData }
    }

    /// (name, value) in index order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        K::NAMES.iter().copied().zip(self.values.iter().copied())
    }

    /// Adds another set (merge, live increments), saturating.
    pub fn add(&mut self, o: &Self) {
        for (a, b) in self.values.iter_mut().zip(o.values) {
            *a = a.saturating_add(b);
        }
    }

    /// Adds another set, or names the first counter whose sum would not fit 64 bits (then
    /// nothing is added).
    pub fn checked_add(&mut self, o: &Self) -> Result<(), &'static str> {
        let mut sum = self.values;
        for (i, (a, b)) in sum.iter_mut().zip(o.values).enumerate() {
            *a = a.checked_add(b).ok_or(K::NAMES[i])?;
        }
        self.values = sum;
        Ok(())
    }

    /// The increments from `old` to `self` (counters that only grow; a smaller value means the
    /// counter restarted, and then all of it is new).
    pub fn since(&self, old: &[u64; N]) -> Self {
        let mut d = [0; N];
        for ((d, n), o) in d.iter_mut().zip(self.values).zip(old) {
            *d = if n >= *o { n - o } else { n };
        }
        Self::new(d)
    }
}

impl<K, const N: usize> std::ops::Index<usize> for Counters<K, N> {
    type Output = u64;
    fn index(&self, i: usize) -> &u64 {
        &self.values[i]
    }
}

impl<K, const N: usize> Clone for Counters<K, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, const N: usize> Copy for Counters<K, N> {}
impl<K, const N: usize> PartialEq for Counters<K, N> {
    fn eq(&self, o: &Self) -> bool {
        self.values == o.values
    }
}
impl<K, const N: usize> Eq for Counters<K, N> {}
impl<K, const N: usize> Default for Counters<K, N> {
    fn default() -> Self {
        Counters { values: [0; N], names: PhantomData }
    }
}
impl<K: CounterNames, const N: usize> fmt::Debug for Counters<K, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: CounterNames, const N: usize> Serialize for Counters<K, N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(N))?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, &v)?;
        }
        m.end()
    }
}

impl<'de, K: CounterNames, const N: usize> Deserialize<'de> for Counters<K, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K, const N: usize>(PhantomData<K>);
        impl<'de, K: CounterNames, const N: usize> Visitor<'de> for V<K, N> {
            type Value = Counters<K, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an object with the counters {}", K::NAMES.join(", "))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut values = [0u64; N];
                let mut seen = [false; N];
                while let Some(key) = map.next_key::<String>()? {
                    let Some(i) = K::NAMES.iter().position(|n| *n == key) else {
                        return Err(de::Error::unknown_field(&key, K::NAMES));
                    };
                    if seen[i] {
                        return Err(de::Error::duplicate_field(K::NAMES[i]));
                    }
                    seen[i] = true;
                    values[i] = map.next_value()?;
                }
                if let Some(i) = seen.iter().position(|s| !s) {
                    return Err(de::Error::missing_field(K::NAMES[i]));
                }
                Ok(Counters::new(values))
            }
        }
        d.deserialize_map(V::<K, N>(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Naks, PsnJson};

    #[test]
    fn written_as_named_fields_and_read_back() {
        let p = PsnJson::new([1, 2, 3, 4, 5]);
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"requests":1,"out_of_sequence":2,"psn_skipped":3,"duplicates":4,"response_out_of_sequence":5}"#
        );
        assert_eq!(serde_json::from_str::<PsnJson>(&text).unwrap(), p);
        assert!(serde_json::from_str::<PsnJson>(r#"{"requests":1}"#).is_err(), "missing counters");
        assert!(serde_json::from_str::<Naks>(r#"{"acks":1,"nope":2}"#).is_err(), "unknown counters");
        let mut n = Naks::new([u64::MAX, 1, 0, 0, 0, 0, 0, 2]);
        n.add(&Naks::new([1, 1, 0, 0, 0, 0, 0, 0]));
        assert_eq!((n[0], n.total()), (u64::MAX, 4));
        assert_eq!(PsnJson::new([5, 1, 0, 0, 0]).since(&[2, 3, 0, 0, 0]).values, [3, 1, 0, 0, 0]);
    }
}
