//! [`Sparse`]: a setting most profiles leave at its default, held as one pointer.
//!
//! A pipeline may declare a profile per case, and the plan keeps every profile for the
//! whole run. Most of a profile's settings (the external-agent fields, safety, faults,
//! prices, …) are never written, yet inline they made a profile 576 bytes. A default
//! `Sparse` is a null pointer; a set one owns its value in a box. It reads, compares,
//! prints and serialises exactly as the value it holds, so profile digests do not change.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::fault::FaultDecl;
use super::profile::{ApprovalAnswer, ContextConfig, NormalizeRule, PolicyRule, Price, SafetyConfig};

/// A type with one default value that can be lent out for the life of the program.
pub trait Defaulted: PartialEq + Sized + 'static {
    fn default_ref() -> &'static Self;
}

/// `T`, or nothing when `T` is at its default. See the module docs.
#[derive(Clone, PartialEq)]
pub struct Sparse<T: Defaulted>(Option<Box<T>>);

impl<T: Defaulted> Sparse<T> {
    /// Holds `value`, boxed only when it is not the default.
    pub fn new(value: T) -> Self {
        if value == *T::default_ref() { Sparse(None) } else { Sparse(Some(Box::new(value))) }
    }

    /// For `skip_serializing_if`: the field is left out exactly when it is the default.
    pub fn is_default(&self) -> bool {
        self.0.is_none()
    }
}

impl<T: Defaulted> Default for Sparse<T> {
    fn default() -> Self {
        Sparse(None)
    }
}

impl<T: Defaulted> From<T> for Sparse<T> {
    fn from(value: T) -> Self {
        Sparse::new(value)
    }
}

impl<T: Defaulted> Deref for Sparse<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(value) => value,
            None => T::default_ref(),
        }
    }
}

impl<T: Defaulted + fmt::Debug> fmt::Debug for Sparse<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: Defaulted + Serialize> Serialize for Sparse<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de, T: Defaulted + Deserialize<'de>> Deserialize<'de> for Sparse<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Sparse::new)
    }
}

/// `Defaulted` through `Default`, one lazily built value per type.
macro_rules! defaulted {
    ($($t:ty),* $(,)?) => {$(
        impl Defaulted for $t {
            fn default_ref() -> &'static Self {
                static DEFAULT: LazyLock<$t> = LazyLock::new(<$t>::default);
                &DEFAULT
            }
        }
    )*};
}

defaulted!(
    Option<u64>,
    Option<String>,
    Option<Price>,
    Vec<String>,
    Vec<NormalizeRule>,
    Vec<PolicyRule>,
    Vec<FaultDecl>,
    BTreeMap<String, String>,
    BTreeMap<String, ApprovalAnswer>,
    ContextConfig,
    SafetyConfig,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_value_is_held_as_nothing_and_any_other_in_a_box() {
        assert!(Sparse::new(Vec::<String>::new()).is_default());
        assert!(Sparse::new(SafetyConfig::default()).0.is_none());
        let set = Sparse::new(vec!["x".to_string()]);
        assert!(!set.is_default());
        assert_eq!(*set, vec!["x".to_string()]);
        assert_eq!(std::mem::size_of::<Sparse<SafetyConfig>>(), std::mem::size_of::<usize>());
    }

    #[test]
    fn it_reads_and_writes_as_the_value_it_holds() {
        let unset: Sparse<SafetyConfig> = serde_json::from_str("{}").unwrap();
        assert!(unset.is_default());
        assert_eq!(serde_json::to_value(&unset).unwrap(), serde_json::to_value(SafetyConfig::default()).unwrap());
        let set: Sparse<SafetyConfig> = serde_json::from_str(r#"{"pii": false}"#).unwrap();
        assert!(!set.pii);
        assert_eq!(serde_json::to_string(&set).unwrap(), serde_json::to_string(&*set).unwrap());
        assert_eq!(format!("{set:?}"), format!("{:?}", *set));
        // a bad value is the value's own error, not one of the wrapper's
        let bad = serde_json::from_str::<Sparse<SafetyConfig>>(r#"{"pii": 3}"#).unwrap_err().to_string();
        let want = serde_json::from_str::<SafetyConfig>(r#"{"pii": 3}"#).unwrap_err().to_string();
        assert_eq!(bad, want);
    }
}
