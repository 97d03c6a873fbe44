"""Volcano's admission for the forecast (`forecast.Policy`), as Volcano treats the portal's queues (capability =
guaranteed + burst, deserved = guaranteed, no guarantee, per resource name: flavors of one resource add up). Jobs go
by priority then first come (plugins/priority JobOrderFn); with the capacity plugin the queues take turns, the one
with the lowest share (allocated over deserved) first (its QueueOrderFn, as actions/allocate pops them), otherwise
across queues by the job order. A job that does not fit does not block the next. The enqueue action admits a
PodGroup when its queue's allocation plus the gang's minimum stays within the queue's real capability: its
capability, at most the cluster less every other queue's guarantee (plugins/capacity, the portal's configuration,
and plugins/proportion alike; the portal's queues guarantee nothing, so a team borrows any idle GPU); allocate then
needs the whole gang free in the cluster (plugins/gang: minAvailable is every worker). Preempt (same queue, lower
priority) and reclaim run only when the scheduler's configuration lists those actions (actions/preempt,
actions/reclaim). Reclaim, with the capacity plugin: a queue reclaims for a job only while its allocation plus the
job stays within its deserved share (preemptiveFn), and takes pods of other queues only while each such queue holds
more than its deserved share (reclaimableFn), lowest priority and newest first; a victim goes whole, since a portal
job's gang is all of its pods."""

from __future__ import annotations

from collections import defaultdict

from .forecast import Holding, Queue, Work, World


class Shares:
    """Per queue and resource what the replay's running jobs hold, and the queues' bounds."""

    def __init__(self, world: World, capacity_plugin: bool = False):
        self.world, self.capacity_plugin = world, capacity_plugin
        self.resource = {f: world.resources.get(f, f) for q in world.queues.values() for f in q.nominal}
        self.capability: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.deserved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for q in world.queues.values():
            for f, nominal in q.nominal.items():
                r = self.resource[f]
                self.deserved[q.name][r] += nominal
                self.capability[q.name][r] += 0 if q.held else nominal + (q.borrowing.get(f) or 0)
        self.cluster: dict[str, int] = defaultdict(int)
        if world.capacity:
            for f, units in world.capacity.items():
                self.cluster[world.resources.get(f, f)] += units
        else:  # no nodes known: the cluster holds what its queues are promised
            for q in world.queues.values():
                for r, v in self.deserved[q.name].items():
                    self.cluster[r] += v
        self.used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.in_cluster: dict[str, int] = defaultdict(int)
        self.running: dict[str, dict[int, Work]] = defaultdict(dict)
        self.shares: dict[str, tuple[float, bool]] = {}

    def real_capability(self, queue: str, r: str) -> int:
        """The cluster less every other queue's guarantee, capped by the queue's capability: the portal's queues
        guarantee nothing (`volcano_queue_manifest`), so the cluster."""
        return min(self.cluster[r], self.capability[queue][r])

    def charge(self, work: Work, sign: int) -> None:
        r = self.resource.get(work.flavor, work.flavor)
        self.used[work.queue][r] += sign * work.units
        self.in_cluster[r] += sign * work.units
        self.shares.pop(work.queue, None)
        if sign > 0:
            self.running[work.queue][work.key] = work
        else:
            self.running[work.queue].pop(work.key, None)

    def share(self, queue: str) -> tuple[float, bool]:
        """capacity.go updateQueueAttrShare and compareShareWithDeserved: the largest allocated / deserved, 1
        without a deserved share (such a queue after one with it, on a tie). Kept until the queue's use changes."""
        if (known := self.shares.get(queue)) is not None:
            return known
        deserved = {r: v for r, v in self.deserved[queue].items() if v}
        share = (max(self.used[queue][r] / v for r, v in deserved.items()), False) if deserved else (1.0, True)
        self.shares[queue] = share
        return share

    def may_reclaim(self, queue: str, r: str, units: int) -> bool:
        """Whether the queue may reclaim for a job of `units`: with the capacity plugin, its allocation plus the
        job stays within its deserved share (capacity.go preemptiveFn, asked as each pod is pipelined); with
        proportion, it is not already at its deserved share in every resource (Session.Overused)."""
        if self.capacity_plugin:
            return bool(self.deserved[queue][r]) and self.used[queue][r] + units <= self.deserved[queue][r]
        deserved = {res: v for res, v in self.deserved[queue].items() if v}
        return not deserved or any(self.used[queue][res] < v for res, v in deserved.items())

    def reclaimable_pods(self, victim: Work, r: str, held: dict[str, int]) -> int:
        """How many of another queue's job's pods reclaim may take, its queue holding `held[queue]` (less the pods
        already taken): each while the queue holds more than its deserved share (capacity.go reclaimableFn,
        checkDeservedExceedance; its guarantee check passes, as the portal's queues guarantee nothing)."""
        workers = max(1, victim.workers)
        pod, deserved = victim.units / workers, self.deserved[victim.queue][r]
        allocated = held.setdefault(victim.queue, self.used[victim.queue][r])
        taken = 0
        while taken < workers and allocated > deserved:
            allocated -= pod
            taken += 1
        held[victim.queue] = allocated
        return taken


class VolcanoPolicy:
    victims_by_size = True  # actions/reclaim tries every starving job, not one head per queue

    def __init__(self, capacity_plugin: bool = False):
        self.capacity_plugin = capacity_plugin
        self._resources: dict[str, str] = {}

    def world(self, holdings: list[Holding], *, cohort: str, capacity: dict[str, int],
              resources: dict[str, str]) -> World:
        """A Queue per team (capability = guaranteed + burst, deserved = guaranteed, no guarantee). Upstream's default
        scheduler configuration has no preempt or reclaim action (installer/helm/chart/volcano/config/
        volcano-scheduler.conf); the portal's (`Volcano.scheduler_setup`) adds reclaim, with the capacity plugin."""
        teams: dict[str, dict] = {}
        for h in holdings:
            entry = teams.setdefault(h.team, {"parent": h.parent, "nominal": {}, "borrowing": {}, "held": h.held})
            entry["nominal"][h.flavor] = h.guaranteed
            entry["borrowing"][h.flavor] = h.burst
        queues = {team: Queue(team, e["parent"], e["nominal"], e["borrowing"], {}, e["held"])
                  for team, e in teams.items()}
        return World(queues=queues, capacity=capacity, resources=resources, preempt=False,
                     reclaim=self.capacity_plugin, fair=self.capacity_plugin)

    def ledger(self, world: World) -> Shares:
        self._resources = dict(world.resources)
        return Shares(world, self.capacity_plugin)

    def impossible(self, world: World, shares: Shares, work: Work) -> str:
        queue = world.queues.get(work.queue)
        if queue is None:
            return "its team has no queue in this cluster"
        r = shares.resource.get(work.flavor, world.resources.get(work.flavor, work.flavor))
        most = min(shares.real_capability(work.queue, r), shares.cluster[r])
        if work.units > most:
            held = " (the team is suspended)" if queue.held else ""
            return f"it asks for {work.units} {r}, more than its queue may ever hold ({most}){held}"
        return ""

    def order(self, work: Work) -> tuple:
        return (-work.priority, work.seq, work.key)

    def pick(self, world: World, shares: Shares, heads: list[Work]) -> int:
        """With the capacity plugin, allocate takes the queue with the lowest share (allocated over deserved, the
        largest over its resources; 1 without any) first (capacity.go QueueOrderFn), then that queue's next job
        in order; shares move as jobs start."""
        return min(range(len(heads)), key=lambda i: self.rank(shares, heads[i]))

    def rank(self, shares: Shares, work: Work) -> tuple:
        """A head's place in `pick`'s order, from its own queue's share alone (so the replay may keep heads in a
        heap)."""
        return (shares.share(work.queue), -work.priority, work.seq, work.key)

    def scope(self, work: Work) -> str:
        return self._resources.get(work.flavor, work.flavor)

    def room(self, shares: Shares, work: Work) -> float:
        r = shares.resource.get(work.flavor, work.flavor)
        return shares.cluster[r] - shares.in_cluster[r]

    def phases(self) -> tuple[bool, ...]:
        return (True,)

    def fits(self, shares: Shares, work: Work, borrowing: bool = True) -> bool:
        r = shares.resource.get(work.flavor, work.flavor)
        if shares.used[work.queue][r] + work.units > shares.real_capability(work.queue, r):
            return False  # enqueue: the queue's real capability
        return shares.in_cluster[r] + work.units <= shares.cluster[r]  # allocate: the whole gang on free capacity

    def victims(self, shares: Shares, work: Work) -> list[Work] | None:
        world, r = shares.world, shares.resource.get(work.flavor, work.flavor)
        if not (world.preempt or world.reclaim):
            return None
        if shares.used[work.queue][r] + work.units > shares.real_capability(work.queue, r):
            return None  # not past enqueue: nothing is preempted for it
        candidates = []
        if world.preempt:
            candidates += [v for v in shares.running[work.queue].values() if v.priority < work.priority]
        if world.reclaim and shares.may_reclaim(work.queue, r, work.units):
            # Only queues above their deserved share give up pods (each pod while still above it), so at most
            # those queues' whole holdings come free: a cheap bound before the search.
            over = [q for q, jobs in shares.running.items()
                    if q != work.queue and jobs and shares.used[q][r] > shares.deserved[q][r]]
            bound = sum(shares.used[q][r] for q in over) + sum(v.units for v in candidates)
            if shares.cluster[r] - shares.in_cluster[r] + bound < work.units:
                return None
            candidates += [v for q in over for v in shares.running[q].values()]
        candidates = [v for v in candidates if shares.resource.get(v.flavor, v.flavor) == r]
        candidates.sort(key=lambda v: v.seq, reverse=True)  # the job order reversed (BuildVictimsPriorityQueue):
        candidates.sort(key=lambda v: v.priority)  # lowest priority, then the newest submitted, first
        room = shares.cluster[r] - shares.in_cluster[r]
        taken, held = [], {}
        for victim in candidates:  # pod by pod, as the simulator's reclaim; a gang short of a pod goes whole
            workers = max(1, victim.workers)
            pods = workers if victim.queue == work.queue else shares.reclaimable_pods(victim, r, held)
            if not pods:
                continue
            taken.append(victim)
            room += pods * victim.units / workers
            if room >= work.units:
                return taken
        return None
