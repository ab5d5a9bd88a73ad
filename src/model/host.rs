//! Bulk work between decoder calls (the big cache reorders) split over the cores the
//! model's intra-op threads use: while it runs those threads sleep (they do not spin), so
//! the two take turns on the same cores.
//!
//! Scoped threads, not a rayon pool: this work runs inside the batch pool's jobs, and a
//! rayon worker that waits for another pool steals its own pool's jobs meanwhile, which
//! here would be another batch waiting for the session this one holds.

use std::sync::Mutex;

/// Runs `f` on every item, the items dealt round-robin to up to `threads` threads (so a run
/// of big items after small ones is still shared), the calling thread being one of them;
/// results in the items' order.
pub fn map_split<T: Send, R: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let n = items.len();
    let parts = threads.clamp(1, n.max(1));
    if parts == 1 {
        return items.into_iter().map(f).collect();
    }
    let mut hands: Vec<Vec<T>> = (0..parts).map(|_| Vec::with_capacity(n.div_ceil(parts))).collect();
    for (i, item) in items.into_iter().enumerate() {
        hands[i % parts].push(item);
    }
    // Each hand in a slot its thread takes it from, so that a hand whose thread cannot be
    // started (the system's limit) is still there to be played on this one.
    let slots: Vec<Mutex<Option<Vec<T>>>> = hands.into_iter().map(|hand| Mutex::new(Some(hand))).collect();
    let take = |slot: &Mutex<Option<Vec<T>>>| slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take().unwrap_or_default();
    let (f, take) = (&f, &take);
    let mut done: Vec<std::vec::IntoIter<R>> = std::thread::scope(|scope| {
        let started: Vec<_> = slots[1..]
            .iter()
            .map(|slot| std::thread::Builder::new().spawn_scoped(scope, move || take(slot).into_iter().map(f).collect::<Vec<R>>()).ok())
            .collect();
        let mut done = vec![take(&slots[0]).into_iter().map(f).collect::<Vec<R>>().into_iter()];
        for (slot, thread) in slots[1..].iter().zip(started) {
            let part = match thread {
                Some(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => take(slot).into_iter().map(f).collect(),
            };
            done.push(part.into_iter());
        }
        done
    });
    (0..n).filter_map(|i| done[i % parts].next()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order() {
        for threads in [0, 1, 2, 3, 8] {
            for n in [0, 1, 2, 5, 17] {
                let got = map_split((0..n).collect(), threads, |x: u32| x * 10);
                assert_eq!(got, (0..n).map(|x| x * 10).collect::<Vec<_>>(), "{threads} threads, {n} items");
            }
        }
    }

    #[test]
    fn items_run_on_several_threads() {
        let ids = map_split((0..4).collect(), 2, |_: u32| std::thread::current().id());
        assert_eq!(ids[0], std::thread::current().id(), "the first hand is the caller's");
        assert_eq!(ids[2], ids[0]);
        assert_ne!(ids[1], ids[0], "the second hand is another thread's");
        assert_eq!(ids[3], ids[1]);
    }
}
