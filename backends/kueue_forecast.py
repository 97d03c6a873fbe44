"""Kueue's admission for the forecast (`forecast.Policy`), as Kueue admits the portal's ClusterQueues:
BestEffortFIFO (a workload that does not fit does not block the next), workloads that need no borrowing before
those that do, then higher priority, then first come (pkg/scheduler/scheduler.go); quota from the cohort tree, a
ClusterQueue's nominal quota lent up to its cohort less what its lendingLimit keeps and borrowed back within its
borrowingLimit (pkg/cache/scheduler/resource_node.go); classical preemption with the portal's policy,
withinClusterQueue LowerPriority and reclaimWithinCohort Any (pkg/scheduler/preemption/preemption.go): a workload
whose ClusterQueue would stay within its nominal quota reclaims from ClusterQueues that borrow, newest and lowest
priority first, and one that would need to borrow preempts only lower priorities of its own ClusterQueue. With
fair sharing (a weight other than 1 declared), the heads of a cohort's ClusterQueues go by the share each would
reach, weighted (pkg/scheduler/fair_sharing_iterator.go, pkg/cache/scheduler/fair_sharing.go)."""

from __future__ import annotations

from collections import defaultdict

from .forecast import Cohort, Holding, Queue, Work, World


class _Node:
    __slots__ = ("name", "parent", "nominal", "borrowing", "lending", "subtree", "usage", "children", "weight")

    def __init__(self, name, nominal=None, borrowing=None, lending=None, weight=1.0):
        self.name, self.parent, self.children, self.weight = name, None, [], weight
        self.nominal, self.borrowing, self.lending = dict(nominal or {}), dict(borrowing or {}), dict(lending or {})
        self.subtree: dict[str, int] = {}
        self.usage: dict[str, int] = defaultdict(int)

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def local(self, f) -> int:
        """What the node keeps for itself: its subtree less what it may lend (nothing kept without a limit)."""
        limit = self.lending.get(f)
        return max(0, self.subtree.get(f, 0) - limit) if limit is not None else 0

    def available(self, f) -> int:
        local_free = max(0, self.local(f) - self.usage[f])
        if self.parent is None:
            return self.subtree.get(f, 0) - self.usage[f]
        above = self.parent.available(f)
        limit = self.borrowing.get(f)
        if limit is not None:
            stored = self.subtree.get(f, 0) - self.local(f)
            used = max(0, self.usage[f] - self.local(f))
            above = min(stored - used + limit, above)
        return local_free + above

    def potential(self, f) -> int:
        if self.parent is None:
            return self.subtree.get(f, 0)
        value = self.local(f) + self.parent.potential(f)
        limit = self.borrowing.get(f)
        return min(self.subtree.get(f, 0) + limit, value) if limit is not None else value

    def add(self, f, value: int) -> None:
        free = max(0, self.local(f) - self.usage[f])
        self.usage[f] += value
        if self.parent is not None and value > free:
            self.parent.add(f, value - free)

    def remove(self, f, value: int) -> None:
        stored = self.usage[f] - self.local(f)
        self.usage[f] -= value
        if stored > 0 and self.parent is not None:
            self.parent.remove(f, min(value, stored))

    def borrows(self, f, extra: int = 0) -> bool:
        return self.usage[f] + extra > self.subtree.get(f, 0)


def _accumulate(node: _Node) -> None:
    node.subtree = dict(node.nominal)
    for child in node.children:
        _accumulate(child)
        for f, value in child.subtree.items():
            node.subtree[f] = node.subtree.get(f, 0) + value - child.local(f)


class Tree:
    """The quota tree of one cluster with the usage of the jobs running in the replay."""

    def __init__(self, world: World):
        self.queues: dict[str, _Node] = {}
        cohorts: dict[str, _Node] = {}

        def cohort(name: str, seen=()) -> _Node:
            if name not in cohorts:
                spec = world.cohorts.get(name)
                node = cohorts[name] = _Node(name, spec.nominal if spec else None, weight=spec.weight if spec else 1.0)
                if spec and spec.parent and spec.parent not in seen and spec.parent != name:
                    node.parent = cohort(spec.parent, (*seen, name))
                    node.parent.children.append(node)
            return cohorts[name]

        for q in world.queues.values():
            node = self.queues[q.name] = _Node(q.name, q.nominal, q.borrowing, q.lending, q.weight)
            if q.parent:
                node.parent = cohort(q.parent)
                node.parent.children.append(node)
        roots = {id(n): n for n in [*self.queues.values(), *cohorts.values()] if n.parent is None}
        for root in roots.values():
            _accumulate(root)
        self.running: dict[str, dict[int, Work]] = defaultdict(dict)

    def charge(self, work: Work, sign: int) -> None:
        node = self.queues.get(work.queue)
        if node is None:  # a job running in a queue the portal holds no quota in takes none of the quota here
            return
        (node.add if sign > 0 else node.remove)(work.flavor, work.units)
        if sign > 0:
            self.running[work.queue][work.key] = work
        else:
            self.running[work.queue].pop(work.key, None)


class KueuePolicy:
    def __init__(self):
        self._roots: dict[str, str] = {}

    def world(self, holdings: list[Holding], *, cohort: str, capacity: dict[str, int],
              resources: dict[str, str]) -> World:
        """A ClusterQueue per team: nominalQuota = guaranteed, borrowingLimit = burst (only inside a cohort, as
        Kueue requires), under its department's Cohort (itself under the cluster's) or the cluster's."""
        teams: dict[str, dict] = {}
        cohorts = {}
        for h in holdings:
            entry = teams.setdefault(h.team, {"parent": h.parent, "nominal": {}, "borrowing": {}, "held": h.held,
                                              "weight": h.weight})
            entry["nominal"][h.flavor] = h.guaranteed
            if h.parent:
                entry["borrowing"][h.flavor] = h.burst
            if h.department:
                cohorts[h.department] = Cohort(h.department, parent=cohort, weight=h.department_weight)
        queues = {team: Queue(team, e["parent"], e["nominal"], e["borrowing"], {}, e["held"], e["weight"])
                  for team, e in teams.items()}
        # The portal declares fairSharing only on a weight other than 1; fair sharing orders the heads then.
        fair = any(q.weight != 1 for q in queues.values()) or any(c.weight != 1 for c in cohorts.values())
        return World(queues=queues, cohorts=cohorts, capacity=capacity, resources=resources, fair=fair)

    def ledger(self, world: World) -> Tree:
        tree = Tree(world)
        self._roots = {name: _root(node).name for name, node in tree.queues.items()}
        return tree

    def impossible(self, world: World, empty: Tree, work: Work) -> str:
        queue = world.queues.get(work.queue)
        if queue is None:
            return "its team has no queue in this cluster"
        if queue.held:
            return "its team's queue is held (the team is suspended)"
        most = empty.queues[work.queue].potential(work.flavor)
        if work.units > most:
            return (f"it asks for {work.units} {work.flavor}, more than its team could ever get ({most}: "
                    f"guaranteed plus what it may borrow)")
        return ""

    def order(self, work: Work) -> tuple:
        return (-work.priority, work.seq, work.key)

    def pick(self, world: World, tree: Tree, heads: list[Work]) -> int:
        """Fair sharing's next head (pkg/scheduler/fair_sharing_iterator.go): each ClusterQueue's first competes
        in its root cohort's tournament, compared at each cohort by the share of the child it comes through with
        its own usage added (`_fair_keys`); of several roots, the first in line."""
        first: dict[str, int] = {}
        for i, w in enumerate(heads):
            if w.queue in tree.queues and (w.queue not in first or self.order(w) < self.order(heads[first[w.queue]])):
                first[w.queue] = i
        if not first:
            return 0
        entries = {tree.queues[heads[i].queue]: i for i in first.values()}
        keys = {i: self._fair_keys(world, tree, heads[i]) for i in first.values()}

        def tournament(cohort: _Node) -> int | None:
            best = None
            for child in cohort.children:
                found = entries.get(child) if child in entries or not child.children else tournament(child)
                if found is not None and (best is None or (keys[found][cohort], self.order(heads[found]))
                                          < (keys[best][cohort], self.order(heads[best]))):
                    best = found
            return best

        roots = {id(root): root for root in map(_root, entries)}
        winners = [entries[root] if root in entries else tournament(root) for root in roots.values()]
        return min((w for w in winners if w is not None), key=lambda i: self.order(heads[i]))

    def _fair_keys(self, world: World, tree: Tree, work: Work) -> dict:
        """Per cohort above the job's ClusterQueue: (the child it comes through borrows the job's flavor, borrows
        with a zero weight, its weighted share), with the job's units added (fair_sharing.go dominantResourceShare:
        the usage above the child's quota over what its parent could lend, per resource, ×1000 ÷ its weight;
        FairSharingPrioritizeNonBorrowing puts the non-borrowing first)."""
        node, f = tree.queues[work.queue], work.flavor
        node.add(f, work.units)
        try:
            keys, child = {}, node
            while child.parent is not None:
                keys[child.parent] = (child.usage[f] > child.subtree.get(f, 0), *self._share(world, child))
                child = child.parent
            return keys
        finally:
            node.remove(f, work.units)

    @staticmethod
    def _share(world: World, node: _Node) -> tuple[bool, float]:
        resource = lambda f: world.resources.get(f, f)  # noqa: E731
        borrowed: dict[str, float] = defaultdict(float)
        for f in set(node.subtree) | {f for f, used in node.usage.items() if used}:
            above = node.usage[f] - node.subtree.get(f, 0)
            if above > 0:
                borrowed[resource(f)] += above
        if not borrowed:
            return False, 0.0
        lendable: dict[str, float] = defaultdict(float)
        for f in _root(node).subtree:
            lendable[resource(f)] += node.parent.potential(f)
        ratio = max((amount * 1000.0 / lendable[r] for r, amount in borrowed.items() if lendable.get(r, 0) > 0),
                    default=0.0)
        return (ratio > 0, ratio) if node.weight == 0 else (False, ratio / node.weight)

    def scope(self, work: Work) -> tuple:
        return (self._roots.get(work.queue, work.queue), work.flavor)

    def room(self, tree: Tree, work: Work) -> float:
        """What the cohort has free plus the most any of its queues keeps for itself (a lendingLimit)."""
        node, f = tree.queues[work.queue], work.flavor
        if node.parent is None:
            return node.available(f)
        root = _root(node)
        kept = max((max(0, q.local(f) - q.usage[f]) for q in tree.queues.values() if q.lending), default=0)
        return root.subtree.get(f, 0) - root.usage[f] + kept

    def phases(self) -> tuple[bool, ...]:
        return (False, True)

    def fits(self, tree: Tree, work: Work, borrowing: bool) -> bool:
        node = tree.queues[work.queue]
        if not borrowing and node.borrows(work.flavor, work.units):
            return False
        return work.units <= node.available(work.flavor)

    def victims(self, tree: Tree, work: Work) -> list[Work] | None:
        node, f = tree.queues[work.queue], work.flavor
        # Kueue tries preemption only where the ClusterQueue's own nominal quota would hold the workload, or a
        # cohort below the root would (flavorassigner.go fitsResourceQuota; flat cohorts here have no such one).
        if work.units > node.nominal.get(f, 0):
            return None
        own = [r for r in tree.running[work.queue].values() if r.flavor == f and r.priority < work.priority]
        lenders, borrowed = [], 0
        if node.parent is not None and not node.borrows(f, work.units):  # reclaim keeps the preemptor in nominal
            root = _root(node)
            for q, jobs in tree.running.items():
                other = tree.queues[q]
                if q != work.queue and jobs and other.borrows(f) and _root(other) is root:
                    lenders.append(q)
                    borrowed += other.usage[f] - other.subtree.get(f, 0)
        if node.available(f) + sum(r.units for r in own) + borrowed < work.units:
            return None  # even every candidate gone would not make room
        others = [r for q in lenders for r in tree.running[q].values() if r.flavor == f]
        newest_lowest = lambda r: (r.priority, -(r.started or 0), r.key)  # noqa: E731
        candidates = sorted(others, key=newest_lowest) + sorted(own, key=newest_lowest)
        targets: list[Work] = []
        for candidate in candidates:
            if candidate.queue != work.queue and not tree.queues[candidate.queue].borrows(f):
                continue  # back within its nominal quota: no longer reclaimable
            tree.charge(candidate, -1)
            targets.append(candidate)
            if self._fits_after(tree, work, targets):
                for i in range(len(targets) - 2, -1, -1):  # fill back: spare whom the preemptor does not need
                    tree.charge(targets[i], +1)
                    if self._fits_after(tree, work, targets[:i] + targets[i + 1:]):
                        targets.pop(i)
                    else:
                        tree.charge(targets[i], -1)
                for target in targets:
                    tree.charge(target, +1)
                return targets
        for target in targets:
            tree.charge(target, +1)
        return None

    @staticmethod
    def _fits_after(tree: Tree, work: Work, targets: list[Work]) -> bool:
        node = tree.queues[work.queue]
        reclaiming = any(t.queue != work.queue for t in targets)
        if reclaiming and node.borrows(work.flavor, work.units):
            return False  # reclaim only while the preemptor stays within its nominal quota (borrowWithinCohort off)
        return work.units <= node.available(work.flavor)


def _root(node: _Node) -> _Node:
    while node.parent is not None:
        node = node.parent
    return node
