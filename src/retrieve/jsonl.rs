//! The JSON-lines format of `trellis retrieve`.
//!
//! In, one request per line: `{"id": any JSON (optional), "history": [message, ...],
//! "entities": [key, ...] (optional)}`, a message being a string or `{"speaker"|"sender":
//! ..., "text"|"message": ...}`. `entities` (identity keys: the exact name, IRI or literal)
//! replaces entity linking, for callers with their own linker or gold annotations.
//! Out, one line per request, in input order: `{"id", "mentioned": [names], "paths":
//! [{"score", "explanation", "triples": [{"head", "relation", "tail", "reverse"}]}]}`.

use super::Retriever;
use crate::graph::candidates::distinct_terms;
use crate::error::StoreError;
use crate::ids::{Direction, EntityId};
use crate::link::Message;
use crate::store::Store;
use serde_json::{json, Value};

pub struct Request {
    pub id: Value,
    pub history: Vec<Message>,
    /// Entity keys given instead of linking the history.
    pub entities: Option<Vec<String>>,
}

/// Parses one input line; the error says what is wrong with it.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = v.as_object().ok_or("expected a JSON object with a \"history\" list")?;
    let history = obj.get("history").and_then(Value::as_array).ok_or("no \"history\" list")?;
    let history = history
        .iter()
        .enumerate()
        .map(|(i, m)| match m {
            Value::String(s) => Ok(Message { speaker: String::new(), text: s.clone() }),
            other => serde_json::from_value(other.clone()).map_err(|_| format!("history[{i}] needs a \"text\" (or \"message\") string")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let entities = match obj.get("entities") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| v.as_str().map(str::to_owned).ok_or_else(|| format!("entities[{i}] must be a string (an entity key)")))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("\"entities\" must be a list of entity keys".into()),
    };
    Ok(Request { id: obj.get("id").cloned().unwrap_or(Value::Null), history, entities })
}

/// Retrieves for one request and renders the output line. The error says what is wrong
/// with the request (an unknown entity key) or the store.
pub fn answer(store: &Store, retriever: &Retriever, request: &Request, top: usize) -> Result<Value, String> {
    let ids = match &request.entities {
        Some(keys) => {
            let mut ids = Vec::with_capacity(keys.len());
            for (i, key) in keys.iter().enumerate() {
                match store.entity_by_key(key).map_err(|e| e.to_string())? {
                    Some(e) => ids.push(e),
                    None => return Err(format!("entities[{i}]: no entity with key {key:?} in the store")),
                }
            }
            ids
        }
        None => {
            let mentions = retriever.linker().link_dialog(&request.history).map_err(|e| e.to_string())?;
            retriever.linker().turn_entities(&mentions, request.history.len()).into_iter().map(|(e, _)| e).collect()
        }
    };
    render(store, retriever, request, ids, top).map_err(|e| e.to_string())
}

fn render(store: &Store, retriever: &Retriever, request: &Request, ids: Vec<EntityId>, top: usize) -> Result<Value, StoreError> {
    let paths = retriever.rank(&super::RetrievalInput { history: &request.history, mentioned: ids.clone() })?;
    let paths = &paths[..top.min(paths.len())];
    // Every name the answer shows, in two batched reads.
    let facts = paths.iter().flat_map(|p| p.hops.iter().map(|h| h.fact()));
    // The mentioned entities are shown too, even when no path holds them.
    let (mut es, rs) = distinct_terms(facts);
    es.extend(&ids);
    es.sort_unstable();
    es.dedup();
    let entity: hashbrown::HashMap<EntityId, String> = es.iter().copied().zip(store.entity_names(&es)?).map(|(e, n)| (e, n.unwrap_or_default())).collect();
    let relation: hashbrown::HashMap<_, String> = rs.iter().copied().zip(store.relation_names(&rs)?).map(|(r, n)| (r, n.unwrap_or_default())).collect();
    let out_paths: Vec<Value> = paths
        .iter()
        .map(|p| {
            let triples: Vec<Value> = p
                .hops
                .iter()
                .map(|h| {
                    let (s, r, o) = h.fact();
                    json!({"head": entity[&s], "relation": relation[&r], "tail": entity[&o], "reverse": h.edge.direction == Direction::In})
                })
                .collect();
            json!({"score": p.score, "explanation": p.explanation, "triples": triples})
        })
        .collect();
    let names: Vec<&String> = ids.iter().map(|e| &entity[e]).collect();
    Ok(json!({"id": request.id, "mentioned": names, "paths": out_paths}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_their_errors() {
        let r = parse_request(r#"{"id": 7, "history": ["hi", {"sender": "user", "message": "Golf?"}]}"#).unwrap();
        assert_eq!(r.id, json!(7));
        assert_eq!(r.history.len(), 2);
        assert_eq!(r.history[1].speaker, "user");
        assert_eq!(parse_request(r#"{"history": 3}"#).err().unwrap(), "no \"history\" list");
        assert_eq!(parse_request(r#"[1]"#).err().unwrap(), "expected a JSON object with a \"history\" list");
        assert_eq!(parse_request(r#"{"history": [{"speaker": "x"}]}"#).err().unwrap(), "history[0] needs a \"text\" (or \"message\") string");
        assert!(parse_request("{oops").err().unwrap().starts_with("invalid JSON: "));
        let r = parse_request(r#"{"history": [], "entities": ["Golf", "Jordan Spieth"]}"#).unwrap();
        assert_eq!(r.entities, Some(vec!["Golf".to_string(), "Jordan Spieth".to_string()]));
        assert_eq!(parse_request(r#"{"history": [], "entities": "Golf"}"#).err().unwrap(), "\"entities\" must be a list of entity keys");
        assert_eq!(parse_request(r#"{"history": [], "entities": [3]}"#).err().unwrap(), "entities[0] must be a string (an entity key)");
    }
}
