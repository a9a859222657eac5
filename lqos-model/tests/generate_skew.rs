//! `GenParams::site_skew` makes top-level sites uneven, deterministically.

use std::collections::BTreeMap;

use lqos_model::{generate, GenParams, Network};

/// Circuits under each top-level site, by site name.
fn per_top_site(net: &Network) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for c in net.circuits() {
        let mut idx = net.node_by_name(c.parent.as_deref().unwrap()).unwrap();
        while let Some(p) = net.parent(idx) {
            idx = p;
        }
        *counts.entry(net.node(idx).name.clone()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn skewed_sites_are_uneven_and_even_ones_are_not() {
    let params = {
        let mut p = GenParams::with_circuits(8000);
        p.sites = 8;
        p
    };
    let even = per_top_site(&generate(&params).network);
    let (min, max) = (even.values().min().unwrap(), even.values().max().unwrap());
    assert!(*max < min * 2, "even sites: {even:?}");

    let skewed_params = {
        let mut p = params;
        p.site_skew = 1.0;
        p
    };
    let skewed = generate(&skewed_params);
    assert_eq!(skewed, generate(&skewed_params), "deterministic");
    let counts = per_top_site(&skewed.network);
    // Site_1 gets about 1/H(8) = 37% of the circuits, Site_8 about 4.6%.
    assert!(counts["Site_1"] > 2000, "{counts:?}");
    assert!(counts["Site_1"] > counts["Site_8"] * 5, "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 8000);
}
