//! The registry's unit tests.

use super::*;
use crate::{LoadTrace, TokenTrace};
use ndarray::{Array3, array};

#[test]
fn ids_are_unique_and_parse_back() {
    let mut seen = std::collections::HashSet::new();
    for p in registry() {
        assert!(seen.insert(p.id()), "{} registered twice", p.id());
        assert_eq!(p.id().as_str().parse::<PlannerId>().unwrap(), p.id());
        assert_eq!(p.id().planner().unwrap().id(), p.id());
        let json = serde_json::to_string(&p.id()).unwrap();
        assert_eq!(serde_json::from_str::<PlannerId>(&json).unwrap(), p.id());
    }
    assert!(serde_json::from_str::<PlannerId>("\"typo\"").is_err());
}

#[test]
fn shared_options_are_declared_alike_and_defaults_fit() {
    for p in registry() {
        assert!(
            p.options()
                .iter()
                .filter(|o| matches!(o.kind, OptionKind::Budget(_)))
                .count()
                <= 1,
            "{}: one budget at most",
            p.id()
        );
        for o in p.options() {
            assert_eq!(option(o.name), Some(o), "{}: {}", p.id(), o.name);
            assert!(o.default.fits(o.kind), "{}: {}", p.id(), o.name);
            assert!(
                o.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{} is not snake_case",
                o.name
            );
        }
    }
}

#[test]
fn needs_read_the_workload_level() {
    let t = TokenTrace::new(4, vec![0], vec![array![[0, 1], [2, 3]]], vec![0, 1]).unwrap();
    let tokens = Workload::from_tokens(t, 2).unwrap();
    assert!(Needs::Tokens.met_by(&tokens) && Needs::Sources.met_by(&tokens));
    let counts = Workload::new(LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0]).unwrap());
    assert!(!Needs::Tokens.met_by(&counts) && Needs::Shape.met_by(&counts));
}
