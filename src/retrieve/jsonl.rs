//! The JSON-lines format of `trellis retrieve`.
//!
//! In, one request per line: `{"id": any JSON (optional), "history": [message, ...],
//! "entities": [key, ...] (optional)}`, a message being a string or `{"speaker"|"sender":
//! ..., "text"|"message": ...}`. `entities` (identity keys: the exact name, IRI or literal)
//! replaces entity linking, for callers with their own linker or gold annotations.
//! A speaker, when given, is a string. Out, one line per request, in input order (the CLI
//! adds `"line"`, the input line number): `{"id", "mentioned": [names], "paths":
//! [{"score", "explanation", "triples": [{"head", "relation", "tail", "reverse"}]}]}`; with
//! `explain`, a generated path also has `"tokens": [{"id", "text", "model", "prior"}]` (the
//! model's and the graph prior's log-probabilities of each generated token), and the answer
//! has `"input_ids"`: the encoder input of the first retrieval step, and, with `rewrite`,
//! `"resolutions"`: the resolved pronouns and references as `trellis link --json` writes them.

use super::{RetrieveError, Retriever};
use crate::dialog::Message;
use crate::graph::candidates::distinct_terms;
use crate::ids::{Direction, EntityId};
use crate::store::error::ReadError;
use crate::store::Store;
use serde_json::{json, Value};

/// One request line of `trellis retrieve`.
pub struct Request {
    /// The request's `"id"`, any JSON, echoed in its answer (null when absent).
    pub id: Value,
    /// The dialog so far, oldest first.
    pub history: Vec<Message>,
    /// Entity keys given instead of linking the history.
    pub entities: Option<Vec<String>>,
}

/// What is wrong with one request line: the line's own fault, so a caller may skip it
/// and go on (`--on-error skip`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// 0-based offset of the first invalid byte.
        byte: usize,
    },
    /// The line is not JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(#[source] serde_json::Error),
    /// The line is JSON but not an object.
    #[error("expected a JSON object with a \"history\" list")]
    NotAnObject,
    /// The object has no `"history"` list.
    #[error("no \"history\" list")]
    NoHistory,
    /// A message of the history is malformed.
    #[error("history[{index}] {problem}")]
    BadMessage {
        /// The message's 0-based position.
        index: usize,
        /// What is wrong with it.
        problem: crate::dialog::MessageProblem,
    },
    /// The dialog is longer than a request may hold.
    #[error(transparent)]
    TooLong(#[from] crate::dialog::DialogTooLong),
    /// `"entities"` is present but not a list.
    #[error("\"entities\" must be a list of entity keys")]
    EntitiesNotAList,
    /// An entry of `"entities"` is not a string.
    #[error("entities[{index}] must be a string (an entity key)")]
    EntityNotAString {
        /// Its 0-based position.
        index: usize,
    },
    /// An entity key that no entity of the store has.
    #[error("entities[{index}]: no entity with key {key:?} in the store")]
    UnknownEntity {
        /// Its 0-based position.
        index: usize,
        /// The key.
        key: String,
    },
}

/// Why a request got no answer: its own fault, or the store's. Only the first is bad
/// input; a store that cannot be read stops the whole run, whatever the request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The request line is malformed (bad input data).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Retrieval failed (a store read or the model).
    #[error(transparent)]
    Retrieve(#[from] RetrieveError),
}

impl From<ReadError> for AnswerError {
    fn from(e: ReadError) -> AnswerError {
        AnswerError::Retrieve(RetrieveError::Read(e))
    }
}

/// Parses one input line as read from a file (any bytes; the newline removed).
pub fn parse_request_bytes(line: &[u8]) -> Result<Request, RequestError> {
    let line = std::str::from_utf8(line).map_err(|e| RequestError::InvalidUtf8 { byte: e.valid_up_to() })?;
    parse_request(line)
}

/// Parses one input line; the error says what is wrong with it.
pub fn parse_request(line: &str) -> Result<Request, RequestError> {
    let v: Value = serde_json::from_str(line).map_err(RequestError::InvalidJson)?;
    let obj = v.as_object().ok_or(RequestError::NotAnObject)?;
    let history = obj.get("history").and_then(Value::as_array).ok_or(RequestError::NoHistory)?;
    let history = history
        .iter()
        .enumerate()
        .map(|(index, m)| Message::from_json(m).map_err(|problem| RequestError::BadMessage { index, problem }))
        .collect::<Result<Vec<_>, _>>()?;
    crate::dialog::check_dialog_size(&history)?;
    let entities = match obj.get("entities") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .enumerate()
                .map(|(index, v)| v.as_str().map(str::to_owned).ok_or(RequestError::EntityNotAString { index }))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(RequestError::EntitiesNotAList),
    };
    Ok(Request { id: obj.get("id").cloned().unwrap_or(Value::Null), history, entities })
}

/// The entities a request names by key: an unknown key is the request's fault (the inner
/// error), a store that cannot be read is not (the outer one).
pub fn resolve_entities(store: &Store, keys: &[String]) -> Result<Result<Vec<EntityId>, RequestError>, ReadError> {
    let mut ids = Vec::with_capacity(keys.len());
    for (index, key) in keys.iter().enumerate() {
        match store.entity_by_key(key)? {
            Some(e) => ids.push(e),
            None => return Ok(Err(RequestError::UnknownEntity { index, key: key.clone() })),
        }
    }
    Ok(Ok(ids))
}

/// What an answer holds.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct AnswerOptions {
    /// Paths per request: the best N.
    pub top: usize,
    /// Per generated token, the model's and the prior's log-probabilities.
    pub explain: bool,
}

impl AnswerOptions {
    /// The best `top` paths, without token scores.
    pub fn new(top: usize) -> AnswerOptions {
        AnswerOptions { top, explain: false }
    }
}

/// Retrieves for one request and renders the output line. An unknown entity key is the
/// request's fault ([`AnswerError::Request`]); a failed read is the store's.
pub fn answer(store: &Store, retriever: &Retriever, request: &Request, top: usize) -> Result<Value, AnswerError> {
    let mut out = answer_batch(store, retriever, &[request], &AnswerOptions { top, explain: false })?;
    Ok(out.pop().unwrap_or(Ok(Value::Null))?)
}

/// Retrieves for many requests at once (the generative retriever decodes them together).
/// Per request its line, or what is wrong with it; the outer error is the store's or the
/// model's and fails the whole batch.
pub fn answer_batch(
    store: &Store,
    retriever: &Retriever,
    requests: &[&Request],
    opts: &AnswerOptions,
) -> Result<Vec<Result<Value, RequestError>>, RetrieveError> {
    // Per request: its entities, their ages and the rewritten history, or what is wrong with it.
    type Linked = Result<(Vec<EntityId>, Vec<u32>, Option<Vec<Message>>), RequestError>;
    let mut ids: Vec<Linked> = Vec::with_capacity(requests.len());
    for request in requests {
        ids.push(match &request.entities {
            Some(keys) => resolve_entities(store, keys)?.map(|v| (v, Vec::new(), None)),
            None => {
                let input = retriever.input(&request.history)?;
                Ok((input.mentioned, input.ages, input.rewritten))
            }
        });
    }
    let inputs: Vec<super::RetrievalInput<'_>> = requests
        .iter()
        .zip(&ids)
        .filter_map(|(r, i)| {
            i.as_ref().ok().map(|(m, a, w)| super::RetrievalInput { history: &r.history, mentioned: m.clone(), ages: a.clone(), rewritten: w.clone() })
        })
        .collect();
    let mut ranked = retriever.rank_batch(&inputs)?.into_iter();
    let mut out = Vec::with_capacity(requests.len());
    for (request, ids) in requests.iter().zip(ids) {
        match ids {
            Err(e) => out.push(Err(e)),
            Ok((ids, ages, rewritten)) => {
                let paths = ranked.next().unwrap_or_default();
                let input = super::RetrievalInput { history: &request.history, mentioned: ids, ages, rewritten };
                out.push(Ok(render(store, retriever, request, input, paths, opts)?));
            }
        }
    }
    Ok(out)
}

fn render(
    store: &Store,
    retriever: &Retriever,
    request: &Request,
    input: super::RetrievalInput<'_>,
    paths: Vec<super::ScoredPath>,
    opts: &AnswerOptions,
) -> Result<Value, RetrieveError> {
    let paths = &paths[..opts.top.min(paths.len())];
    // Every name the answer shows, in two batched reads.
    let facts = paths.iter().flat_map(|p| p.hops.iter().map(|h| h.fact()));
    // The mentioned entities are shown too, even when no path holds them.
    let (mut es, rs) = distinct_terms(facts);
    es.extend(&input.mentioned);
    es.sort_unstable();
    es.dedup();
    let entity: hashbrown::HashMap<EntityId, String> = es.iter().copied().zip(store.entity_names(&es)?).map(|(e, n)| (e, n.unwrap_or_default())).collect();
    let relation: hashbrown::HashMap<_, String> = rs.iter().copied().zip(store.relation_names(&rs)?).map(|(r, n)| (r, n.unwrap_or_default())).collect();
    let tokenizer = retriever.generative().map(|g| g.model().dir().tokenizer());
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
            let mut v = json!({"score": p.score, "explanation": p.explanation, "triples": triples});
            if opts.explain && !p.tokens.is_empty() {
                let tokens: Vec<Value> = p
                    .tokens
                    .iter()
                    .map(|t| json!({"id": t.id, "text": tokenizer.and_then(|k| k.id_to_token(t.id)), "model": t.model, "prior": t.prior}))
                    .collect();
                v["tokens"] = Value::Array(tokens);
            }
            v
        })
        .collect();
    let names: Vec<&String> = input.mentioned.iter().map(|e| &entity[e]).collect();
    let mut v = json!({"id": request.id, "mentioned": names, "paths": out_paths});
    if opts.explain && request.entities.is_none() && retriever.linker().config().rewrite {
        // Every pronoun and reference the rewrite resolved: which words, which entity, which
        // facts agreed.
        let resolved: Vec<crate::link::Mention> =
            retriever.linker().link_dialog(&request.history)?.into_iter().filter(|m| m.kind == crate::link::MatchKind::Resolved).collect();
        v["resolutions"] = json!(resolved);
    }
    if opts.explain {
        // The encoder input the model read (first step, the rewritten history with
        // `rewrite_input`), for comparing decoders on it.
        if let Some(g) = retriever.generative() {
            // As gsr read it: rewritten only when `rewrite_input` names it, not another part.
            let written = (!retriever.reads_rewrite && input.rewritten.is_some()).then(|| input.as_written());
            v["input_ids"] = json!(g.encoder_ids(written.as_ref().unwrap_or(&input), &[])?);
        }
    }
    Ok(v)
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
        let err = |line: &str| parse_request(line).err().unwrap().to_string();
        assert_eq!(err(r#"{"history": 3}"#), "no \"history\" list");
        assert_eq!(err(r#"[1]"#), "expected a JSON object with a \"history\" list");
        assert_eq!(err(r#"{"history": [{"speaker": "x"}]}"#), "history[0] needs a \"text\" (or \"message\") string");
        assert_eq!(err(r#"{"history": ["a", {"speaker": 3, "text": "b"}]}"#), "history[1] has a \"speaker\" (or \"sender\") that is not a string");
        assert_eq!(err(r#"{"history": [{"sender": ["x"], "message": "b"}]}"#), "history[0] has a \"speaker\" (or \"sender\") that is not a string");
        assert_eq!(err(r#"{"history": [{"text": 3}]}"#), "history[0] needs a \"text\" (or \"message\") string");
        assert_eq!(err(r#"{"history": [7]}"#), "history[0] needs a \"text\" (or \"message\") string");
        assert_eq!(err(r#"{"history": [{"text": "a", "message": "b"}]}"#), "history[0] has both \"text\" and \"message\"");
        assert_eq!(err(r#"{"history": [{"text": "a", "speaker": "u", "sender": "v"}]}"#), "history[0] has both \"speaker\" and \"sender\"");
        let r = parse_request(r#"{"history": [{"speaker": null, "text": "a"}, {"sender": "bot", "message": "b"}]}"#).unwrap();
        assert_eq!((r.history[0].speaker.as_str(), r.history[1].speaker.as_str(), r.history[1].text.as_str()), ("", "bot", "b"));
        assert!(err("{oops").starts_with("invalid JSON: "));
        let bytes_err = parse_request_bytes(b"{\"history\": [\"caf\xc3\"]}").err().unwrap();
        assert_eq!(bytes_err.to_string(), "invalid UTF-8 at byte 17 of the line");
        let r = parse_request(r#"{"history": [], "entities": ["Golf", "Jordan Spieth"]}"#).unwrap();
        assert_eq!(r.entities, Some(vec!["Golf".to_string(), "Jordan Spieth".to_string()]));
        assert_eq!(err(r#"{"history": [], "entities": "Golf"}"#), "\"entities\" must be a list of entity keys");
        assert_eq!(err(r#"{"history": [], "entities": [3]}"#), "entities[0] must be a string (an entity key)");
    }
}
