//! Checking a report read from a file before anything trusts it (`merge`): no repeated key in
//! any object, the shipped JSON Schema's rules (strict: unknown fields, negative or fractional
//! counts, a priority past 7 are refused), and what the schema cannot say (an interval that
//! ends before it starts, a flow whose last packet precedes its first). Every refusal names the
//! field.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::model::Report;

/// The schema reports are checked against (the one shipped in `schema/`).
pub const SCHEMA_JSON: &str = include_str!("../../../schema/report-v1.schema.json");

/// Why a report was refused: the field (a JSON pointer) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub detail: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() { "/" } else { &self.field };
        write!(f, "field {field}: {}", self.detail)
    }
}

/// The first object key that appears twice in `bytes` (JSON), with its pointer.
pub fn duplicate_key(bytes: &[u8]) -> Option<Invalid> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = Walk { path: String::new(), found: &mut found }.deserialize(&mut de);
    found
}

/// Walks any JSON value, remembering the first repeated key.
struct Walk<'a> {
    path: String,
    found: &'a mut Option<Invalid>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}/{}", self.path, key.replace('~', "~0").replace('/', "~1"));
            if !seen.insert(key) && self.found.is_none() {
                *self.found =
                    Some(Invalid { field: path.clone(), detail: "the key appears twice in its object".into() });
            }
            map.next_value_seed(Walk { path, found: self.found })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq.next_element_seed(Walk { path: format!("{}/{i}", self.path), found: self.found })?.is_some() {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// The schema's first complaint about `v`, if any.
pub fn schema_violation(v: &serde_json::Value) -> Option<Invalid> {
    static VALIDATOR: std::sync::OnceLock<Result<jsonschema::Validator, String>> = std::sync::OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| {
        let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).map_err(|e| e.to_string())?;
        jsonschema::validator_for(&schema).map_err(|e| e.to_string())
    });
    match validator {
        Ok(val) => {
            val.iter_errors(v).next().map(|e| Invalid { field: e.instance_path().to_string(), detail: e.to_string() })
        }
        Err(e) => Some(Invalid { field: String::new(), detail: format!("the shipped schema does not load: {e}") }),
    }
}

/// What the schema cannot say: time spans that run backwards.
pub fn semantic_violation(r: &Report) -> Option<Invalid> {
    let bad = |field: String, detail: String| Some(Invalid { field, detail });
    for (i, f) in r.flows.iter().enumerate() {
        if f.packets > 0 && f.first_ns > f.last_ns {
            return bad(format!("/flows/{i}"), format!("first_ns {} is after last_ns {}", f.first_ns, f.last_ns));
        }
    }
    let senders = r.pfc.senders.iter().map(|s| ("senders", &s.pause.intervals));
    let pause = r.pfc.pause_senders.iter().map(|s| ("pause_senders", &s.pause.intervals));
    let mut counters: std::collections::BTreeMap<&str, usize> = Default::default();
    for (list, intervals) in senders.chain(pause) {
        let n = counters.entry(list).or_default();
        for (j, [a, b]) in intervals.iter().enumerate() {
            if a > b {
                return bad(
                    format!("/pfc/{list}/{n}/intervals/{j}"),
                    format!("the interval starts at {a}, after its end {b}"),
                );
            }
        }
        *n += 1;
    }
    if r.capture.frames > 0 && r.capture.start_ns > r.capture.end_ns {
        return bad("/capture".into(), format!("start_ns {} is after end_ns {}", r.capture.start_ns, r.capture.end_ns));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_with_their_path() {
        assert_eq!(duplicate_key(br#"{"a":1,"b":[{"c":1},{"c":2}]}"#), None);
        let d = duplicate_key(br#"{"a":1,"b":[{"c":1},{"c":2,"c":3}]}"#).unwrap();
        assert_eq!(d.field, "/b/1/c");
        assert_eq!(duplicate_key(br#"{"x":{},"x":{}}"#).unwrap().field, "/x");
    }
}
