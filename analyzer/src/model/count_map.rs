//! Counts by name (a flow's opcodes, DSCPs, PCPs), written as a JSON object in name order. A
//! flow has a handful of each, so a sorted short vector holds them, with names from fixed
//! tables shared rather than allocated per flow: a report of 200 000 flows stays small.

use std::borrow::Cow;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountMap(Vec<(Cow<'static, str>, u64)>);

impl CountMap {
    /// Adds `n` to `name`'s count, keeping the names in order.
    pub fn add(&mut self, name: impl Into<Cow<'static, str>>, n: u64) {
        let name = name.into();
        match self.0.binary_search_by(|(k, _)| k.as_ref().cmp(name.as_ref())) {
            Ok(i) => self.0[i].1 += n,
            Err(i) => self.0.insert(i, (name, n)),
        }
    }

    /// Adds `n` to `name`'s count, or `None` when the sum would not fit 64 bits.
    pub fn checked_add(&mut self, name: &str, n: u64) -> Option<()> {
        match self.0.binary_search_by(|(k, _)| k.as_ref().cmp(name)) {
            Ok(i) => self.0[i].1 = self.0[i].1.checked_add(n)?,
            Err(i) => self.0.insert(i, (Cow::Owned(name.to_string()), n)),
        }
        Some(())
    }

    pub fn get(&self, name: &str) -> Option<&u64> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(name)).ok().map(|i| &self.0[i].1)
    }

    /// (name, count) in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &u64)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<N: Into<Cow<'static, str>>> FromIterator<(N, u64)> for CountMap {
    fn from_iter<I: IntoIterator<Item = (N, u64)>>(it: I) -> Self {
        let mut m = CountMap::default();
        for (k, v) in it {
            m.add(k, v);
        }
        m
    }
}

impl Serialize for CountMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k.as_ref(), v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for CountMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CountMap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of counts")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CountMap, A::Error> {
                let mut m = CountMap::default();
                while let Some((k, v)) = map.next_entry::<String, u64>()? {
                    m.add(k, v);
                }
                Ok(m)
            }
        }
        d.deserialize_map(V)
    }
}

/// "0" to "63": DSCP (and PCP) values as names, shared.
pub fn number_name(n: u8) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &NAMES.get_or_init(|| (0..=255u16).map(|i| i.to_string()).collect())[n as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_by_name_like_a_btreemap() {
        let mut m = CountMap::default();
        for (k, n) in [("RC_SEND_ONLY", 2), ("CNP", 1), ("RC_ACKNOWLEDGE", 3), ("CNP", 4)] {
            m.add(k, n);
        }
        let b: std::collections::BTreeMap<&str, u64> = [("RC_SEND_ONLY", 2), ("CNP", 5), ("RC_ACKNOWLEDGE", 3)].into();
        assert_eq!(serde_json::to_string(&m).unwrap(), serde_json::to_string(&b).unwrap());
        let back: CountMap = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert_eq!((m.get("CNP"), m.get("x")), (Some(&5), None));
        assert_eq!(number_name(26), "26");
    }
}
