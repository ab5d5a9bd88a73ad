//! The prize-collecting Steiner tree (forest) problem, solved as `pcst_fast` does: the
//! Goemans-Williamson moat-growing scheme in the fast variant of Hegde, Indyk and Schmidt
//! (2015), followed by one of four pruning rules. Maximizes the prizes of the chosen nodes
//! minus the costs of the chosen edges (equivalently minimizes the costs of the edges plus
//! the prizes left out), within a factor 2 for `gw` pruning.
//!
//! Growth: every node starts as its own active cluster. Active clusters grow their moats at
//! rate 1; an edge becomes tight when the moats on it add up to its cost, and the two
//! clusters merge along it; a cluster whose moats reach its prize sum goes inactive. Events
//! come from mergeable heaps of edge "parts" (one per edge end, keyed by the time at which
//! that end's cluster has grown enough), so each event costs O(log n) amortized and the
//! whole graph is never rescanned. Growth stops when `num_clusters` clusters are active
//! (unrooted); their nodes are the "good" ones.
//!
//! Pruning (of the forest of merge edges among good nodes):
//! - `None`: every merge edge, every good node;
//! - `Simple`: merge edges between good nodes;
//! - `Gw`: Goemans-Williamson: walking the merge edges from the last to the first, a
//!   cluster that went inactive before being absorbed is cut off unless a kept edge needs it;
//! - `Strong`: Johnson, Minkoff and Phillips: in each tree, from its best root, cut every
//!   subtree whose prizes do not pay for it and its edge.
//!
//! Simultaneous events (common: the retrievers' prizes are small integers and the costs
//! equal) are taken in `pcst_fast`'s order: deactivations before edge events, clusters by
//! index, edge parts by the shape of their pairing heap, which follows the same linking
//! rules. tools/reference/check_pcst.py checks the answers are the same nodes and edges as
//! `pcst_fast` 1.0.10's, on random and real instances; the unit tests hold a sample.

/// Which pruning to apply after the growth phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pruning {
    /// Every merge edge, every good node.
    None,
    /// Merge edges between good nodes.
    Simple,
    /// Goemans-Williamson: inactive clusters cut off unless a kept edge needs them.
    Gw,
    /// Johnson, Minkoff and Phillips: subtrees whose prizes do not pay for them cut off.
    Strong,
}

/// A bad PCST instance.
#[derive(Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PcstError {
    /// A prize that is negative, NaN or infinite.
    #[error("prize of node {node} is {value}: prizes must be finite and >= 0")]
    BadPrize {
        /// The node's index.
        node: usize,
        /// The prize.
        value: f64,
    },
    /// A cost that is negative, NaN or infinite.
    #[error("cost of edge {edge} is {value}: costs must be finite and >= 0")]
    BadCost {
        /// The edge's index.
        edge: usize,
        /// The cost.
        value: f64,
    },
    /// An edge names a node past the last one.
    #[error("edge {edge} joins node {node}, but there are only {nodes} nodes")]
    BadEndpoint {
        /// The edge's index.
        edge: usize,
        /// The node it names.
        node: u32,
        /// How many nodes there are.
        nodes: usize,
    },
    /// The edge and cost lists differ in length.
    #[error("{edges} edges but {costs} costs")]
    CostCount {
        /// Edges given.
        edges: usize,
        /// Costs given.
        costs: usize,
    },
    /// `num_clusters` is 0.
    #[error("num_clusters must be at least 1")]
    NoClusters,
}

/// The chosen nodes (ascending, except with `Pruning::None`: merge-edge endpoints first) and
/// edges (indices into the instance's edge list).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PcstSolution {
    /// The chosen nodes.
    pub nodes: Vec<u32>,
    /// The chosen edges, as indices into the instance's edge list.
    pub edges: Vec<u32>,
}

/// Prizes of `nodes` minus costs of `edges`: what the solver maximizes.
pub fn net_value(prizes: &[f64], costs: &[f64], solution: &PcstSolution) -> f64 {
    solution.nodes.iter().map(|&v| prizes[v as usize]).sum::<f64>() - solution.edges.iter().map(|&e| costs[e as usize]).sum::<f64>()
}

const NIL: u32 = u32::MAX;

/// Relative tolerance under which an edge counts as tight (as `pcst_fast`).
const EPS: f64 = 1e-10;

/// Solves the unrooted PCST (a forest of `num_clusters` trees) on an undirected graph.
pub fn solve(prizes: &[f64], edges: &[(u32, u32)], costs: &[f64], num_clusters: usize, pruning: Pruning) -> Result<PcstSolution, PcstError> {
    if num_clusters == 0 {
        return Err(PcstError::NoClusters);
    }
    if edges.len() != costs.len() {
        return Err(PcstError::CostCount { edges: edges.len(), costs: costs.len() });
    }
    for (node, &value) in prizes.iter().enumerate() {
        if !(value.is_finite() && value >= 0.0) {
            return Err(PcstError::BadPrize { node, value });
        }
    }
    for (edge, (&(u, v), &value)) in edges.iter().zip(costs).enumerate() {
        if !(value.is_finite() && value >= 0.0) {
            return Err(PcstError::BadCost { edge, value });
        }
        for node in [u, v] {
            if node as usize >= prizes.len() {
                return Err(PcstError::BadEndpoint { edge, node, nodes: prizes.len() });
            }
        }
    }
    let mut gw = Growth::new(prizes, edges, costs);
    gw.grow(num_clusters);
    Ok(gw.prune(pruning))
}

/// Pairing heaps of edge parts, one per cluster, with O(1) meld, O(1) "add to every key"
/// and decrease-key by cutting the node's subtree, all in one arena indexed by edge part
/// (a part is in at most one heap at a time). The shape rules (who stays on top when two
/// keys are equal, the two-pass pairing on delete-min) decide the order of simultaneous
/// events, so they follow `pcst_fast`'s: on instances with ties this gives the same trees.
struct Heaps {
    nodes: Vec<HeapNode>,
    /// Scratch for `pop`, kept to avoid an allocation per event.
    scratch: Vec<u32>,
}

#[derive(Clone, Copy)]
struct HeapNode {
    /// The key, less the pending `add` of every ancestor (a root's key is exact).
    key: f64,
    /// Pending addition for every descendant of this node.
    add: f64,
    child: u32,
    sibling: u32,
    /// The parent if this is its first child, else the left sibling; NIL for a root.
    left_up: u32,
}

impl Heaps {
    fn new(parts: usize) -> Heaps {
        Heaps { nodes: vec![HeapNode { key: 0.0, add: 0.0, child: NIL, sibling: NIL, left_up: NIL }; parts], scratch: Vec::new() }
    }

    /// Joins two heap roots (exact keys); on equal keys `b` goes on top. Returns the root.
    fn link(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        let (top, below) = if self.nodes[a as usize].key < self.nodes[b as usize].key { (a, b) } else { (b, a) };
        let pending = self.nodes[top as usize].add;
        let first_child = self.nodes[top as usize].child;
        let n = &mut self.nodes[below as usize];
        // `below` now sits under `top`'s pending addition: keep its true keys unchanged.
        n.key -= pending;
        n.add -= pending;
        n.left_up = top;
        n.sibling = first_child;
        if first_child != NIL {
            self.nodes[first_child as usize].left_up = below;
        }
        self.nodes[top as usize].child = below;
        top
    }

    fn insert(&mut self, root: u32, key: f64, part: u32) -> u32 {
        self.nodes[part as usize] = HeapNode { key, add: 0.0, child: NIL, sibling: NIL, left_up: NIL };
        self.link(root, part)
    }

    fn add_all(&mut self, root: u32, delta: f64) {
        if root != NIL {
            let n = &mut self.nodes[root as usize];
            n.key += delta;
            n.add += delta;
        }
    }

    /// Sets the key of `part` (whose true key is `from`) to `to` <= `from`, cutting it and
    /// its subtree out and linking them with the root. Returns the root.
    fn decrease_key(&mut self, root: u32, part: u32, from: f64, to: f64) -> u32 {
        let n = &mut self.nodes[part as usize];
        // Its descendants lose the ancestors' pending additions: carry them over.
        n.add += from - n.key;
        n.key = to;
        let (up, next) = (n.left_up, n.sibling);
        if up == NIL {
            return root;
        }
        if self.nodes[up as usize].child == part {
            self.nodes[up as usize].child = next;
        } else {
            self.nodes[up as usize].sibling = next;
        }
        if next != NIL {
            self.nodes[next as usize].left_up = up;
        }
        let n = &mut self.nodes[part as usize];
        n.left_up = NIL;
        n.sibling = NIL;
        self.link(root, part)
    }

    /// Removes the root; returns the new root (two-pass pairing).
    fn pop(&mut self, root: u32) -> u32 {
        let pending = self.nodes[root as usize].add;
        let mut subheaps = std::mem::take(&mut self.scratch);
        subheaps.clear();
        let mut c = self.nodes[root as usize].child;
        while c != NIL {
            let n = &mut self.nodes[c as usize];
            let next = n.sibling;
            n.key += pending;
            n.add += pending;
            n.sibling = NIL;
            n.left_up = NIL;
            subheaps.push(c);
            c = next;
        }
        self.nodes[root as usize].child = NIL;
        // First pass: link the children two by two, left to right; then right to left.
        let mut paired = 0;
        let mut i = 0;
        while i + 1 < subheaps.len() {
            subheaps[paired] = self.link(subheaps[i], subheaps[i + 1]);
            paired += 1;
            i += 2;
        }
        if i < subheaps.len() {
            subheaps[paired] = subheaps[i];
            paired += 1;
        }
        let mut top = NIL;
        for j in (0..paired).rev() {
            top = self.link(top, subheaps[j]);
        }
        self.scratch = subheaps;
        top
    }
}

#[derive(Clone)]
struct Cluster {
    active: bool,
    active_start: f64,
    active_end: f64,
    moat: f64,
    prize_sum: f64,
    subcluster_moat_sum: f64,
    merged_into: u32,
    /// The edge this cluster was formed along and the two clusters it joined (NIL for nodes).
    merged_along: u32,
    children: (u32, u32),
    /// Path compression: an ancestor and the moats from here up to (not including) it.
    skip_up: u32,
    skip_up_sum: f64,
    necessary: bool,
    heap: u32,
    /// Bumped whenever the cluster's entry in the global edge-event queue goes stale.
    event_version: u32,
}

/// A total order on event times (`total_cmp`; the solver never produces NaN).
#[derive(Clone, Copy)]
struct Time(f64);
impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

struct InactiveMerge {
    inactive_cluster: u32,
    active_node: u32,
    inactive_node: u32,
}

struct Growth<'a> {
    prizes: &'a [f64],
    edges: &'a [(u32, u32)],
    costs: &'a [f64],
    clusters: Vec<Cluster>,
    heaps: Heaps,
    /// Per edge part: dropped (its edge joins a cluster to itself; skipped when it surfaces).
    part_deleted: Vec<bool>,
    /// Per edge part: the moats on its side at which its event fires (to recover its true
    /// key for decrease-key the way `pcst_fast` does, rounding included).
    part_target: Vec<f64>,
    edge_events: std::collections::BinaryHeap<std::cmp::Reverse<(Time, u32, u32)>>,
    deactivations: std::collections::BinaryHeap<std::cmp::Reverse<(Time, u32)>>,
    now: f64,
    num_active: usize,
    merge_edges: Vec<u32>,
    inactive_merge_of_edge: Vec<u32>,
    inactive_merges: Vec<InactiveMerge>,
    good: Vec<bool>,
    /// Scratch for `covered`'s path compression.
    visited: Vec<(u32, f64)>,
}

impl<'a> Growth<'a> {
    fn new(prizes: &'a [f64], edges: &'a [(u32, u32)], costs: &'a [f64]) -> Growth<'a> {
        let n = prizes.len();
        let mut g = Growth {
            prizes,
            edges,
            costs,
            clusters: Vec::with_capacity(2 * n),
            heaps: Heaps::new(2 * edges.len()),
            part_deleted: vec![false; 2 * edges.len()],
            part_target: vec![0.0; 2 * edges.len()],
            edge_events: Default::default(),
            deactivations: Default::default(),
            now: 0.0,
            num_active: n,
            merge_edges: Vec::new(),
            inactive_merge_of_edge: vec![NIL; edges.len()],
            inactive_merges: Vec::new(),
            good: vec![false; n],
            visited: Vec::new(),
        };
        for (i, &prize) in prizes.iter().enumerate() {
            g.clusters.push(Cluster {
                active: true,
                active_start: 0.0,
                active_end: -1.0,
                moat: 0.0,
                prize_sum: prize,
                subcluster_moat_sum: 0.0,
                merged_into: NIL,
                merged_along: NIL,
                children: (NIL, NIL),
                skip_up: NIL,
                skip_up_sum: 0.0,
                necessary: false,
                heap: NIL,
                event_version: 0,
            });
            g.deactivations.push(std::cmp::Reverse((Time(prize), i as u32)));
        }
        // Both ends active: each grows half the edge.
        for (e, &(u, v)) in edges.iter().enumerate() {
            let half = costs[e] / 2.0;
            g.part_target[2 * e] = half;
            g.part_target[2 * e + 1] = half;
            g.push_part(u, half, 2 * e as u32);
            g.push_part(v, half, 2 * e as u32 + 1);
        }
        for c in 0..n as u32 {
            g.schedule(c);
        }
        g
    }

    fn push_part(&mut self, cluster: u32, key: f64, part: u32) {
        let heap = self.clusters[cluster as usize].heap;
        self.clusters[cluster as usize].heap = self.heaps.insert(heap, key, part);
    }

    /// Puts the cluster's earliest edge part in the global queue (superseding older entries).
    fn schedule(&mut self, c: u32) {
        let cl = &mut self.clusters[c as usize];
        cl.event_version += 1;
        if cl.active && cl.heap != NIL {
            let key = self.heaps.nodes[cl.heap as usize].key;
            self.edge_events.push(std::cmp::Reverse((Time(key), c, cl.event_version)));
        }
    }

    fn endpoint(&self, part: u32) -> u32 {
        let (u, v) = self.edges[(part / 2) as usize];
        if part.is_multiple_of(2) {
            u
        } else {
            v
        }
    }

    /// The moats covering an edge end so far, those of them that stopped growing, and the
    /// outermost cluster around it.
    fn covered(&mut self, part: u32) -> (f64, f64, u32) {
        let mut c = self.endpoint(part);
        let mut sum = 0.0;
        let mut visited = std::mem::take(&mut self.visited);
        visited.clear();
        while self.clusters[c as usize].merged_into != NIL {
            visited.push((c, sum));
            let cl = &self.clusters[c as usize];
            if cl.skip_up != NIL {
                sum += cl.skip_up_sum;
                c = cl.skip_up;
            } else {
                sum += cl.moat;
                c = cl.merged_into;
            }
        }
        for &(v, at) in &visited {
            let cl = &mut self.clusters[v as usize];
            cl.skip_up = c;
            cl.skip_up_sum = sum - at;
        }
        self.visited = visited;
        let top = &self.clusters[c as usize];
        if top.active {
            let finished = sum;
            (sum + (self.now - top.active_start), finished, c)
        } else {
            sum += top.moat;
            (sum, sum, c)
        }
    }

    /// The earliest edge event: (time, cluster whose heap holds it).
    fn next_edge_event(&mut self) -> Option<(f64, u32)> {
        while let Some(&std::cmp::Reverse((Time(t), c, version))) = self.edge_events.peek() {
            let cl = &self.clusters[c as usize];
            if version == cl.event_version && cl.active {
                return Some((t, c));
            }
            self.edge_events.pop();
        }
        None
    }

    fn next_deactivation(&mut self) -> Option<(f64, u32)> {
        while let Some(&std::cmp::Reverse((Time(t), c))) = self.deactivations.peek() {
            if self.clusters[c as usize].active {
                return Some((t, c));
            }
            self.deactivations.pop();
        }
        None
    }

    fn grow(&mut self, target: usize) {
        while self.num_active > target {
            let edge = self.next_edge_event();
            let cluster = self.next_deactivation();
            match (edge, cluster) {
                (Some((te, c)), Some((tc, _))) if te < tc => self.edge_event(te, c),
                (Some((te, c)), None) => self.edge_event(te, c),
                (_, Some((tc, c))) => self.deactivate(tc, c),
                (None, None) => break,
            }
        }
        for c in 0..self.clusters.len() {
            if self.clusters[c].active {
                self.mark_good(c as u32);
            }
        }
    }

    fn deactivate(&mut self, t: f64, c: u32) {
        self.deactivations.pop();
        self.now = t;
        let cl = &mut self.clusters[c as usize];
        cl.active = false;
        cl.active_end = t;
        cl.moat = t - cl.active_start;
        self.num_active -= 1;
        self.schedule(c);
    }

    fn edge_event(&mut self, t: f64, c: u32) {
        self.now = t;
        self.edge_events.pop();
        let part = self.clusters[c as usize].heap;
        self.clusters[c as usize].heap = self.heaps.pop(part);
        if self.part_deleted[part as usize] {
            self.schedule(c);
            return;
        }
        let other_part = part ^ 1;
        let cost = self.costs[(part / 2) as usize];
        let (sum_here, _, here) = self.covered(part);
        let (sum_there, finished_there, there) = self.covered(other_part);
        if here == there {
            // Both ends are inside one cluster already: the edge is of no further use.
            self.part_deleted[other_part as usize] = true;
            self.schedule(c);
            return;
        }
        // (Every other path below re-schedules `here`, which is `c`.)
        let remainder = cost - sum_here - sum_there;
        if remainder < EPS * cost || remainder == 0.0 {
            self.merge(part, here, there, remainder);
            return;
        }
        let o = there as usize;
        if self.clusters[o].active {
            // Both sides grow: they meet halfway through what is left.
            let at = t + remainder / 2.0;
            self.part_target[part as usize] = sum_here + remainder / 2.0;
            self.push_part(here, at, part);
            self.schedule(here);
            let from = self.clusters[o].active_start + self.part_target[other_part as usize] - finished_there;
            self.clusters[o].heap = self.heaps.decrease_key(self.clusters[o].heap, other_part, from, at);
            self.schedule(there);
            self.part_target[other_part as usize] = sum_there + remainder / 2.0;
        } else {
            // Only this side grows; the frozen side re-checks as soon as it is revived.
            self.part_target[part as usize] = cost - finished_there;
            self.push_part(here, t + remainder, part);
            self.schedule(here);
            let end = self.clusters[o].active_end;
            let from = end + self.part_target[other_part as usize] - finished_there;
            self.clusters[o].heap = self.heaps.decrease_key(self.clusters[o].heap, other_part, from, end);
            self.part_target[other_part as usize] = finished_there;
        }
    }

    fn merge(&mut self, part: u32, here: u32, there: u32, remainder: f64) {
        let edge = part / 2;
        let other_part = part ^ 1;
        self.merge_edges.push(edge);
        self.part_deleted[other_part as usize] = true;
        let at = self.now + remainder;
        let new = self.clusters.len() as u32;
        let (h, o) = (here as usize, there as usize);

        self.clusters[h].active = false;
        self.clusters[h].active_end = at;
        self.clusters[h].moat = at - self.clusters[h].active_start;
        self.clusters[h].merged_into = new;
        self.num_active -= 1;
        self.schedule(here);

        if self.clusters[o].active {
            self.clusters[o].active = false;
            self.clusters[o].active_end = at;
            self.clusters[o].moat = at - self.clusters[o].active_start;
            self.num_active -= 1;
        } else {
            // Revived: its frozen edge events resume from now.
            let shift = at - self.clusters[o].active_end;
            self.heaps.add_all(self.clusters[o].heap, shift);
            self.inactive_merge_of_edge[edge as usize] = self.inactive_merges.len() as u32;
            self.inactive_merges.push(InactiveMerge { inactive_cluster: there, active_node: self.endpoint(part), inactive_node: self.endpoint(other_part) });
        }
        self.clusters[o].merged_into = new;
        self.schedule(there);

        let heap = self.heaps.link(self.clusters[h].heap, self.clusters[o].heap);
        let prize_sum = self.clusters[h].prize_sum + self.clusters[o].prize_sum;
        let subcluster_moat_sum = self.clusters[h].subcluster_moat_sum + self.clusters[o].subcluster_moat_sum + self.clusters[h].moat + self.clusters[o].moat;
        self.clusters.push(Cluster {
            active: true,
            active_start: at,
            active_end: -1.0,
            moat: 0.0,
            prize_sum,
            subcluster_moat_sum,
            merged_into: NIL,
            merged_along: edge,
            children: (here, there),
            skip_up: NIL,
            skip_up_sum: 0.0,
            necessary: false,
            heap,
            event_version: 0,
        });
        self.num_active += 1;
        self.deactivations.push(std::cmp::Reverse((Time(at + prize_sum - subcluster_moat_sum), new)));
        self.schedule(new);
    }

    fn mark_good(&mut self, c: u32) {
        let mut stack = vec![c];
        while let Some(c) = stack.pop() {
            let cl = &self.clusters[c as usize];
            if cl.merged_along != NIL {
                stack.push(cl.children.0);
                stack.push(cl.children.1);
            } else {
                self.good[c as usize] = true;
            }
        }
    }

    fn mark_necessary(&mut self, node: u32) {
        let mut c = node;
        while c != NIL && !self.clusters[c as usize].necessary {
            self.clusters[c as usize].necessary = true;
            c = self.clusters[c as usize].merged_into;
        }
    }

    fn prune(mut self, pruning: Pruning) -> PcstSolution {
        let n = self.prizes.len();
        if pruning == Pruning::None {
            let mut included = vec![false; n];
            let mut nodes = Vec::new();
            for &e in &self.merge_edges {
                let (u, v) = self.edges[e as usize];
                for x in [u, v] {
                    if !std::mem::replace(&mut included[x as usize], true) {
                        nodes.push(x);
                    }
                }
            }
            nodes.extend((0..n as u32).filter(|&x| self.good[x as usize] && !included[x as usize]));
            return PcstSolution { nodes, edges: self.merge_edges };
        }
        let kept: Vec<u32> = self
            .merge_edges
            .iter()
            .copied()
            .filter(|&e| {
                let (u, v) = self.edges[e as usize];
                self.good[u as usize] && self.good[v as usize]
            })
            .collect();
        let good_nodes = |deleted: &[bool], good: &[bool]| (0..n as u32).filter(|&x| good[x as usize] && !deleted[x as usize]).collect();
        if pruning == Pruning::Simple {
            return PcstSolution { nodes: good_nodes(&vec![false; n], &self.good), edges: kept };
        }
        let mut adjacency: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n];
        for &e in &kept {
            let (u, v) = self.edges[e as usize];
            adjacency[u as usize].push((v, self.costs[e as usize]));
            adjacency[v as usize].push((u, self.costs[e as usize]));
        }
        let mut deleted = vec![false; n];
        let edges = if pruning == Pruning::Gw {
            let mut out = Vec::new();
            for &e in kept.iter().rev() {
                let (u, v) = self.edges[e as usize];
                if deleted[u as usize] && deleted[v as usize] {
                    continue;
                }
                let m = self.inactive_merge_of_edge[e as usize];
                if m == NIL {
                    self.mark_necessary(u);
                    self.mark_necessary(v);
                    out.push(e);
                    continue;
                }
                let (inactive_cluster, active_node, inactive_node) = {
                    let im = &self.inactive_merges[m as usize];
                    (im.inactive_cluster, im.active_node, im.inactive_node)
                };
                if self.clusters[inactive_cluster as usize].necessary {
                    out.push(e);
                    self.mark_necessary(inactive_node);
                    self.mark_necessary(active_node);
                } else {
                    delete_side(&adjacency, &mut deleted, inactive_node, active_node);
                }
            }
            out
        } else {
            strong_prune(self.prizes, &kept, self.edges, &adjacency, &mut deleted);
            kept.iter()
                .copied()
                .filter(|&e| {
                    let (u, v) = self.edges[e as usize];
                    !deleted[u as usize] && !deleted[v as usize]
                })
                .collect()
        };
        PcstSolution { nodes: good_nodes(&deleted, &self.good), edges }
    }
}

/// Deletes `start` and everything reachable from it without passing through `keep`.
fn delete_side(adjacency: &[Vec<(u32, f64)>], deleted: &mut [bool], start: u32, keep: u32) {
    deleted[start as usize] = true;
    let mut stack = vec![start];
    while let Some(x) = stack.pop() {
        for &(y, _) in &adjacency[x as usize] {
            if y != keep && !deleted[y as usize] {
                deleted[y as usize] = true;
                stack.push(y);
            }
        }
    }
}

/// Strong pruning of each tree of the forest `kept`: root it where the best subtree is
/// largest, then cut every subtree whose net payoff (prizes less edges) is not positive.
fn strong_prune(prizes: &[f64], kept: &[u32], edges: &[(u32, u32)], adjacency: &[Vec<(u32, f64)>], deleted: &mut [bool]) {
    let n = prizes.len();
    let mut component = vec![false; n];
    let mut parent: Vec<(u32, f64)> = vec![(NIL, 0.0); n];
    let mut payoff = vec![0.0f64; n];
    for &e in kept {
        let start = edges[e as usize].0;
        if component[start as usize] {
            continue;
        }
        // Preorder from `start` (parents before children).
        let order = preorder(adjacency, start, &mut parent);
        for &x in &order {
            component[x as usize] = true;
        }
        subtree_payoffs(prizes, adjacency, &order, &parent, &mut payoff);
        // Re-rooting: the payoff of the best tree containing each node, top-down.
        let mut best = (start, payoff[start as usize]);
        for &x in order.iter().skip(1) {
            let (p, cost) = parent[x as usize];
            let own = payoff[x as usize] - cost;
            let mut rest = payoff[p as usize];
            if own > 0.0 {
                rest -= own;
            }
            if rest > cost {
                payoff[x as usize] += rest - cost;
            }
            if payoff[x as usize] > best.1 {
                best = (x, payoff[x as usize]);
            }
        }
        let order = preorder(adjacency, best.0, &mut parent);
        subtree_payoffs(prizes, adjacency, &order, &parent, &mut payoff);
        for &x in &order {
            if deleted[x as usize] {
                continue;
            }
            let (p, cost) = parent[x as usize];
            if p != NIL && payoff[x as usize] - cost <= 0.0 {
                delete_side(adjacency, deleted, x, p);
            }
        }
    }
}

fn preorder(adjacency: &[Vec<(u32, f64)>], root: u32, parent: &mut [(u32, f64)]) -> Vec<u32> {
    parent[root as usize] = (NIL, 0.0);
    let mut order = vec![root];
    let mut i = 0;
    while i < order.len() {
        let x = order[i];
        i += 1;
        for &(y, cost) in &adjacency[x as usize] {
            if y != parent[x as usize].0 {
                parent[y as usize] = (x, cost);
                order.push(y);
            }
        }
    }
    order
}

/// Prize of each node plus the positive net payoffs of its child subtrees (bottom-up).
fn subtree_payoffs(prizes: &[f64], adjacency: &[Vec<(u32, f64)>], order: &[u32], parent: &[(u32, f64)], payoff: &mut [f64]) {
    for &x in order.iter().rev() {
        let mut total = prizes[x as usize];
        for &(y, cost) in &adjacency[x as usize] {
            if y != parent[x as usize].0 {
                let net = payoff[y as usize] - cost;
                if net > 0.0 {
                    total += net;
                }
            }
        }
        payoff[x as usize] = total;
    }
}

crate::limits::named_choices!(Pruning, "pruning", { None => "none", Simple => "simple", Gw => "gw", Strong => "strong" });

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    #[derive(serde::Deserialize)]
    struct Case {
        prizes: Vec<f64>,
        edges: Vec<(u32, u32)>,
        costs: Vec<f64>,
        num_clusters: usize,
        pruning: Pruning,
        nodes: Vec<u32>,
        edges_chosen: Vec<u32>,
    }

    #[derive(serde::Deserialize)]
    struct Cases {
        cases: Vec<Case>,
    }

    /// pcst_fast 1.0.10's answers (tools/reference/check_pcst.py --write-fixture), half of the
    /// instances with integer prizes and costs in {0, 0.5, 1}, so full of ties.
    #[test]
    fn same_answers_as_pcst_fast() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pcst_cases.json");
        let cases: Cases = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(cases.cases.len(), 240);
        let mut nontrivial = 0;
        for (i, c) in cases.cases.iter().enumerate() {
            let got = solve(&c.prizes, &c.edges, &c.costs, c.num_clusters, c.pruning).unwrap();
            assert_eq!(sorted(got.nodes.clone()), sorted(c.nodes.clone()), "case {i} ({:?}): nodes", c.pruning);
            assert_eq!(sorted(got.edges.clone()), sorted(c.edges_chosen.clone()), "case {i} ({:?}): edges", c.pruning);
            if c.pruning == Pruning::None {
                // Without pruning the order is meaningful too: merge order.
                assert_eq!(got.edges, c.edges_chosen, "case {i}: merge order");
            }
            nontrivial += usize::from(c.edges_chosen.len() >= 2);
        }
        assert!(nontrivial > 100, "the cases must choose real trees ({nontrivial})");
    }

    /// Worked by hand: a path 0 - 1 - 2 with prizes 5, 0, 5 and costs 1, 1. All three nodes
    /// grow until t = 0.5 (node 1 stops at once: prize 0), edge 0-1 goes tight at t = 1 from
    /// node 0's side alone, likewise 1-2; the tree is worth 10 - 2 = 8.
    #[test]
    fn path_worth_joining() {
        for pruning in [Pruning::None, Pruning::Simple, Pruning::Gw, Pruning::Strong] {
            let s = solve(&[5.0, 0.0, 5.0], &[(0, 1), (1, 2)], &[1.0, 1.0], 1, pruning).unwrap();
            assert_eq!(sorted(s.nodes.clone()), vec![0, 1, 2], "{pruning:?}");
            assert_eq!(sorted(s.edges.clone()), vec![0, 1], "{pruning:?}");
            assert_eq!(net_value(&[5.0, 0.0, 5.0], &[1.0, 1.0], &s), 8.0);
        }
    }

    /// Edges dearer than the prizes they would bring: node 1 (no prize) stops at t = 0, so
    /// an edge (cost 10) could only go tight at t = 10; node 0 stops at t = 3, and node 2
    /// (prize 4) is the last cluster left active, so it alone is the answer.
    #[test]
    fn expensive_edges_leave_the_best_single_node() {
        let s = solve(&[3.0, 0.0, 4.0], &[(0, 1), (1, 2)], &[10.0, 10.0], 1, Pruning::Gw).unwrap();
        assert_eq!(s, PcstSolution { nodes: vec![2], edges: vec![] });
    }

    /// 1-2 goes tight at t = 0.1, 0-{1,2} at t = 0.5; node 3 (prize 1, behind an edge of
    /// cost 3) stops at t = 1, leaving one active cluster: {0, 1, 2}, worth 8.5 - 1.2.
    #[test]
    fn a_leaf_that_does_not_pay_stays_out() {
        let prizes = [4.0, 4.0, 0.5, 1.0];
        let edges = [(0, 1), (1, 2), (2, 3)];
        let costs = [1.0, 0.2, 3.0];
        for pruning in [Pruning::Gw, Pruning::Strong] {
            let s = solve(&prizes, &edges, &costs, 1, pruning).unwrap();
            assert_eq!(sorted(s.nodes.clone()), vec![0, 1, 2], "{pruning:?}");
            assert_eq!(sorted(s.edges.clone()), vec![0, 1], "{pruning:?}");
        }
    }

    #[test]
    fn bad_instances_are_refused() {
        assert_eq!(solve(&[-1.0], &[], &[], 1, Pruning::Gw), Err(PcstError::BadPrize { node: 0, value: -1.0 }));
        assert!(matches!(solve(&[f64::NAN], &[], &[], 1, Pruning::Gw), Err(PcstError::BadPrize { node: 0, .. })));
        assert_eq!(solve(&[1.0, 1.0], &[(0, 1)], &[-2.0], 1, Pruning::Gw), Err(PcstError::BadCost { edge: 0, value: -2.0 }));
        assert_eq!(solve(&[1.0], &[(0, 1)], &[1.0], 1, Pruning::Gw), Err(PcstError::BadEndpoint { edge: 0, node: 1, nodes: 1 }));
        assert_eq!(solve(&[1.0], &[], &[1.0], 1, Pruning::Gw), Err(PcstError::CostCount { edges: 0, costs: 1 }));
        assert_eq!(solve(&[1.0], &[], &[], 0, Pruning::Gw), Err(PcstError::NoClusters));
        assert_eq!(solve(&[], &[], &[], 1, Pruning::Gw), Ok(PcstSolution::default()));
    }

    /// The best connected subtree of `tree` (node set, edge set) by brute force.
    fn best_subtree(prizes: &[f64], edges: &[(u32, u32)], costs: &[f64], tree: &PcstSolution) -> f64 {
        let nodes = &tree.nodes;
        let mut best = f64::NEG_INFINITY;
        for mask in 1u32..(1 << nodes.len()) {
            let inside = |v: u32| nodes.iter().position(|&x| x == v).is_some_and(|i| mask >> i & 1 == 1);
            let chosen: Vec<u32> = tree.edges.iter().copied().filter(|&e| inside(edges[e as usize].0) && inside(edges[e as usize].1)).collect();
            // A subforest of a tree is connected iff it has one edge fewer than nodes.
            if chosen.len() + 1 != mask.count_ones() as usize {
                continue;
            }
            let value = (0..nodes.len()).filter(|&i| mask >> i & 1 == 1).map(|i| prizes[nodes[i] as usize]).sum::<f64>()
                - chosen.iter().map(|&e| costs[e as usize]).sum::<f64>();
            best = best.max(value);
        }
        best
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Strong pruning finds the best subtree of the grown tree (brute force over its
        /// subsets), which is at least what GW pruning keeps; every answer is a tree.
        #[test]
        fn strong_pruning_is_the_best_subtree(
            prizes in proptest::collection::vec(0u8..6, 2..9),
            raw_edges in proptest::collection::vec((0u32..8, 0u32..8, 0u8..5), 1..16),
        ) {
            let prizes: Vec<f64> = prizes.into_iter().map(f64::from).collect();
            let n = prizes.len() as u32;
            let edges: Vec<(u32, u32)> = raw_edges.iter().map(|&(u, v, _)| (u % n, v % n)).collect();
            let costs: Vec<f64> = raw_edges.iter().map(|&(_, _, c)| f64::from(c) / 2.0).collect();
            let simple = solve(&prizes, &edges, &costs, 1, Pruning::Simple).unwrap();
            let gw = solve(&prizes, &edges, &costs, 1, Pruning::Gw).unwrap();
            let strong = solve(&prizes, &edges, &costs, 1, Pruning::Strong).unwrap();
            for s in [&simple, &gw, &strong] {
                proptest::prop_assert_eq!(s.edges.len() + 1, s.nodes.len().max(1));
                for &e in &s.edges {
                    let (u, v) = edges[e as usize];
                    proptest::prop_assert!(s.nodes.contains(&u) && s.nodes.contains(&v));
                }
            }
            let best = best_subtree(&prizes, &edges, &costs, &simple);
            let value = net_value(&prizes, &costs, &strong);
            proptest::prop_assert!((value - best).abs() < 1e-9, "strong {} vs best subtree {}", value, best);
            proptest::prop_assert!(value >= net_value(&prizes, &costs, &gw) - 1e-9);
        }
    }
}
