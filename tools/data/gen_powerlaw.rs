//! Synthetic power-law knowledge graph generator, for ingest benchmarks at any scale.
//!
//! Subjects and objects are drawn from a log-uniform distribution over the entity ids
//! (density proportional to 1/x: a power law with exponent 1, so a few hubs carry a large
//! share of the facts, as in Freebase and Wikidata), relations likewise over the relation
//! ids. Ids are mapped to names through a fixed permutation so hubs are spread over the
//! name space. Deterministic for a given seed.
//!
//! ```text
//! trellis-gen-powerlaw --facts 50000000 --entities 5000000 --relations 1000 --format tsv > g.tsv
//! ```
//!
//! `--attach KEYS` (a file of entity keys, one per line) puts each key in the place of a
//! synthetic entity drawn uniformly at random: the facts of that id are written with the key,
//! so the listed entities (a real graph's, loaded beside) get synthetic neighbours in the
//! generated graph's own degree distribution. The other facts are the same as without it.
//! `--only-attached` writes only the facts that touch a listed key: added by `trellis update`
//! to the store of the plain graph, they give its listed entities those neighbourhoods too.

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform over 0..n: P(x) proportional to 1/(x+1).
    fn power_law(&mut self, n: u64) -> u64 {
        let x = ((n as f64 + 1.0).powf(self.unit())) as u64;
        x.saturating_sub(1).min(n - 1)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_owned())
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        eprintln!("usage: trellis-gen-powerlaw [--facts N] [--entities N] [--relations N] [--seed N] [--format tsv|nt] [--attach KEYS [--only-attached]]");
        return Ok(());
    }
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--facts" | "--entities" | "--relations" | "--seed" | "--format" | "--attach" => i += 2,
            "--only-attached" => i += 1,
            other => {
                eprintln!("unknown argument {other:?} (--help lists them)");
                std::process::exit(2)
            }
        }
    }
    let parse = |name: &str, default: &str| -> u64 {
        let v = arg(&args, name, default);
        v.parse().unwrap_or_else(|_| {
            eprintln!("{name}: expected a number, got {v:?}");
            std::process::exit(2)
        })
    };
    let facts = parse("--facts", "1000000");
    let entities = parse("--entities", "100000").max(2);
    let relations = parse("--relations", "500").max(1);
    let seed = parse("--seed", "42");
    let format = arg(&args, "--format", "tsv");
    if format != "tsv" && format != "nt" {
        eprintln!("--format: expected tsv or nt, got {format:?}");
        std::process::exit(2);
    }
    // A multiplier coprime with the entity count permutes ids.
    let mut mult = 2_654_435_761 % entities;
    while gcd(mult, entities) != 1 {
        mult += 1;
    }
    let attached = match args.iter().position(|a| a == "--attach") {
        Some(i) => {
            let Some(path) = args.get(i + 1) else {
                eprintln!("--attach: expected a file of entity keys");
                std::process::exit(2)
            };
            if format != "tsv" {
                eprintln!("--attach: keys are written as they are, in tsv only");
                std::process::exit(2);
            }
            attach(path, entities, seed)?
        }
        None => HashMap::new(),
    };
    let only_attached = args.iter().any(|a| a == "--only-attached");
    if only_attached && attached.is_empty() {
        eprintln!("--only-attached: needs --attach KEYS");
        std::process::exit(2);
    }
    let mut rng = SplitMix(seed);
    let out = std::io::stdout().lock();
    let mut w = BufWriter::with_capacity(1 << 20, out);
    let mut written = 0;
    while written < facts {
        let s = rng.power_law(entities) * mult % entities;
        let o = rng.power_law(entities) * mult % entities;
        if s == o {
            continue;
        }
        let r = rng.power_law(relations);
        if only_attached && !attached.contains_key(&s) && !attached.contains_key(&o) {
            written += 1;
            continue;
        }
        if format == "tsv" {
            if attached.is_empty() {
                writeln!(w, "entity {s}\trelation {r}\tentity {o}")?;
            } else {
                write_entity(&mut w, &attached, s)?;
                write!(w, "\trelation {r}\t")?;
                write_entity(&mut w, &attached, o)?;
                w.write_all(b"\n")?;
            }
        } else {
            writeln!(w, "<http://example.org/e/{s}> <http://example.org/r/{r}> <http://example.org/e/{o}> .")?;
        }
        written += 1;
    }
    w.flush()
}

fn write_entity(w: &mut impl Write, attached: &HashMap<u64, String>, id: u64) -> std::io::Result<()> {
    match attached.get(&id) {
        Some(key) => w.write_all(key.as_bytes()),
        None => write!(w, "entity {id}"),
    }
}

/// Synthetic ids, drawn uniformly (without repeats) by a generator of their own, mapped to
/// the keys of `path` in file order.
fn attach(path: &str, entities: u64, seed: u64) -> std::io::Result<HashMap<u64, String>> {
    let file = std::fs::File::open(path).map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
    let mut keys = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| std::io::Error::new(e.kind(), format!("{path}:{}: {e}", n + 1)))?;
        if line.contains('\t') || line.is_empty() {
            eprintln!("{path}:{}: an entity key is one non-empty field without tabs", n + 1);
            std::process::exit(2);
        }
        keys.push(line);
    }
    if keys.len() as u64 > entities / 2 {
        eprintln!("--attach: {} keys for {entities} entities; at most half the entities can be replaced", keys.len());
        std::process::exit(2);
    }
    let mut rng = SplitMix(seed ^ 0x5EED_A77A_C4ED);
    let mut out = HashMap::with_capacity(keys.len());
    for key in keys {
        loop {
            let id = rng.next() % entities;
            if let std::collections::hash_map::Entry::Vacant(slot) = out.entry(id) {
                slot.insert(key);
                break;
            }
        }
    }
    Ok(out)
}
