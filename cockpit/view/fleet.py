"""The fleet table's rows: one per node, and on a big fleet node-set rows.

A fleet of a few nodes shows one row per node. Above :data:`FOLD_ABOVE` nodes, the nodes
whose row would say the same thing apart from their name, wave and time in stage (the
same stage and state: driver, CUDA, GPUs, health) fold into one row named by their node
set in the notation of ClusterShell and Slurm (``gpu[0001-0480] pending ok``,
:func:`cockpit.fleet.nodeset.fold_nodeset`), which the operator expands on demand. A
node an operator must see is never inside a fold (:func:`pinned_nodes`): the canary, the
current wave, a node a trigger fired on, a node with a failed step or rolling back.

Pure functions of the state and the live probes, as the rest of the view model.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

from cockpit.changelog.events import wave_number
from cockpit.changelog.facts import ProbeFacts
from cockpit.engine.state import DONE, PENDING, ROLLBACK_FAILED, ROLLED_BACK, ROLLING_BACK, CockpitState, NodeProgress
from cockpit.fleet.nodeset import fold_nodeset
from cockpit.gpu.nodestate import Health, NodeState, show
from cockpit.view.lines import since
from cockpit.view.panes import nodes_needing_action

FLEET_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "Node"),
    ("wave", "W"),
    ("stage", "Stage"),
    ("driver", "Driver kmod/user"),
    ("cuda", "CUDA"),
    ("gpus", "GPUs"),
    ("health", "Health"),
    ("since", "In stage"),
)

#: Columns whose cells may differ among the nodes of one node-set row (what it says of
#: them); every other cell is the same for all its nodes.
FOLD_FREE_COLUMNS: frozenset[str] = frozenset({"node", "wave", "since"})
_FOLD_KEY_AT = tuple(i for i, (key, _) in enumerate(FLEET_COLUMNS) if key not in FOLD_FREE_COLUMNS)

#: A fleet of at most this many nodes shows one row per node, as a screen has room for.
FOLD_ABOVE = 32
#: Fewer nodes alike than this stay rows of their own (a fold of two saves one row).
FOLD_MIN = 3
#: A node-set row's name is cut, at a comma, to about this many characters ("…" ends it).
NODESET_ROOM = 28
#: An expanded set of more nodes than this shows node sets of this many, each expanded in turn.
EXPAND_CHUNK = 64
#: The row key of a node-set row starts with this (a node's row key is its name).
SET_KEY_PREFIX = "set:"
FOLDED_MARK = "▸ "
EXPANDED_MARK = "▾ "


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One row's cells, in :data:`FLEET_COLUMNS` order: a node's, or a node set's.

    A node-set row lists its nodes in ``members`` (``node`` is the first of them, the one
    the stage pane and the node detail show for it); ``fold`` is the key of the set the row
    is (or, for a node of an expanded set, the set it belongs to); ``expanded``: the set's
    own nodes follow it. ``tones`` gives each cell its tone (see :mod:`cockpit.view.richtext`),
    decided from the state that wrote the cell, never read back from its text."""

    node: str
    cells: tuple[str, ...]
    members: tuple[str, ...] = ()
    fold: str | None = None
    expanded: bool = False
    tones: tuple[str, ...] = ()

    def tone(self, index: int) -> str:
        """The tone of cell ``index`` (none where the row gives none)."""
        return self.tones[index] if index < len(self.tones) else ""

    @property
    def key(self) -> str:
        """The table's key of this row: the node's name, or the set's key."""
        return self.fold if self.members and self.fold is not None else self.node

    @property
    def is_set(self) -> bool:
        return bool(self.members)


#: Below this many columns the screen (and a cast frame) is narrow: one pane above another,
#: and health as its short word.
NARROW_BELOW = 120

#: Each health verdict in one word that fits the fleet table at 80 columns (the long
#: form, up to 23 characters, would be cut to ``driver-library-mismat``); the node detail
#: and the change log keep the long form.
HEALTH_SHORT: dict[Health, str] = {
    Health.OK: "ok",
    Health.DRIVER_LIBRARY_MISMATCH: "mismatch",
    Health.DRIVER_NOT_LOADED: "no driver",
    Health.GPU_MISSING: "GPU lost",
    Health.FABRIC_MANAGER_DOWN: "FM down",
    Health.REBOOTING: "rebooting",
    Health.UNREACHABLE: "offline",
    Health.UNKNOWN: "unknown",
}
_HEALTH_OF_WORD: dict[str, Health] = {**{str(h): h for h in Health}, **{w: h for h, w in HEALTH_SHORT.items()}}


def health_word(health: str, *, narrow: bool = False) -> str:
    """A node's health for a fleet cell: its short word when the table is narrow."""
    known = _HEALTH_OF_WORD.get(health)
    return HEALTH_SHORT[known] if narrow and known is not None else health


def health_tone(health: Health) -> str:
    """The tone of a health verdict."""
    if health is Health.OK:
        return "ok"
    if health in (Health.UNKNOWN, Health.REBOOTING):
        return "warning"
    return "alarm"


def stage_failed(progress: NodeProgress) -> bool:
    """Whether the node's stage cell reports a failure: a failed step in its current stage (no
    step running), or a rollback that failed."""
    if progress.current == ROLLBACK_FAILED:
        return True
    stage = progress.peek_stage(progress.current)
    if stage is None or any(s.status == "running" for s in stage.steps.values()):
        return False
    return any(s.status == "failed" for s in stage.steps.values())


def health_of(text: str) -> Health:
    """A recorded health word (long form or short) as the verdict; an unknown word: unknown."""
    return _HEALTH_OF_WORD.get(text, Health.UNKNOWN)


def driver_cell(live: NodeState | None, probe: ProbeFacts, engine_driver: object = None) -> str:
    """Kernel module and user-space versions as probed; where no probe read either, the driver
    the window's engine reports (the GPU Operator's node labels, from NVML, which only starts
    where the two match), else N/A."""
    kmod = live.kernel_module_version if live else probe.kernel_module_version
    user = live.driver_version if live else probe.driver_version
    if kmod is None and user is None:
        return show(engine_driver) if engine_driver else "N/A"
    if kmod == user:
        return show(kmod)
    return f"{show(kmod)}/{show(user)}"


#: The stage cell of a node whose wave started and on which nothing ran yet: "drain" with a
#: growing time read as a drain under way.
WAITING = "waiting"


def stage_cell(progress: NodeProgress) -> str:
    cur = progress.current
    if cur in (PENDING, DONE, ROLLING_BACK, ROLLED_BACK):
        if cur == ROLLING_BACK and progress.rollback is not None:
            running = [s.id for s in progress.rollback.steps.values() if s.status == "running"]
            return f"rollback {running[0]}…" if running else "rollback"
        return cur
    if cur == ROLLBACK_FAILED:
        return "rollback FAILED"  # never counted or shown as rolled back
    stage = progress.peek_stage(cur)
    if stage is None:  # held: a state, not a stage
        return cur
    if not progress.begun and all(s.status in ("open", "skipped") for s in stage.steps.values()):
        return WAITING  # its wave started, nothing ran on it yet (a wave's slot, a person's first step)
    if any(s.status == "running" for s in stage.steps.values()):
        return f"{cur} …"
    if any(s.status == "failed" for s in stage.steps.values()):
        return f"{cur} ✗"
    return cur


def fleet_row(progress: NodeProgress, live: NodeState | None, now: datetime, *, narrow: bool = False) -> FleetRow:
    """One node's row: from its live probe when there is one, else from the last recorded probe.

    ``narrow``: a table at 80 columns, where health reads as its short word."""
    probe = progress.probe
    base = progress.baseline.gpu_count
    # an unreachable node's probe records gpu_count 0: nothing was counted, so it reads unknown
    recorded = probe.gpu_count if probe.reachable is not False else None
    present: object = live.gpu_count if live is not None and live.reachable else recorded
    if present is None:
        gpus = "N/A"
    else:
        gpus = f"{present}/{show(base)}" if base is not None else f"{present}"
    cuda = live.cuda_version if live is not None else probe.cuda_version
    verdict = live.health if live is not None else health_of(probe.health or Health.UNKNOWN)
    health = str(verdict)
    cells = (
        progress.node,
        str(wave_number(progress.wave)),
        stage_cell(progress),
        driver_cell(live, probe, progress.observation.driver_version),
        show(cuda),
        gpus,
        health_word(health, narrow=narrow),
        since(progress.entered_at, now),
    )
    tones = tuple(
        "alarm" if key == "stage" and stage_failed(progress) else health_tone(verdict) if key == "health" else ""
        for key, _ in FLEET_COLUMNS
    )
    return FleetRow(progress.node, cells, tones=tones)


# --------------------------------------------------------------------------- the fold


def pinned_nodes(state: CockpitState) -> frozenset[str]:
    """The nodes never hidden inside a node set: the canary wave, the current wave, every
    node a trigger fired on since it was last cleared, and every node that needs an action
    (a failed step) or is rolling back or failed to."""
    pinned: set[str] = set(state.waves[0]) if state.waves else set()
    if state.current_wave is not None and state.current_wave < len(state.waves):
        pinned.update(state.waves[state.current_wave])
    for trigger in state.triggers.values():
        pinned.update(n for n in trigger.fired_nodes if n)
        if trigger.status == "fired" and trigger.node:
            pinned.add(trigger.node)
    pinned.update(nodes_needing_action(state))
    pinned.update(n for n, p in state.nodes.items() if p.current in (ROLLING_BACK, ROLLBACK_FAILED))
    return frozenset(pinned)


def fold_key(row: FleetRow) -> str:
    """What a node's row says apart from its name, wave and time in stage: nodes with the
    same key fold together. It is the key of their node-set row."""
    return SET_KEY_PREFIX + "\x1f".join(row.cells[i] for i in _FOLD_KEY_AT)


@lru_cache(maxsize=512)
def nodeset_label(members: tuple[str, ...], room: int = NODESET_ROOM) -> str:
    """The node set of ``members`` (``gpu[0001-0480]``), cut at a comma to about ``room``
    characters, with how many nodes it names: ``gpu[0001-0480] (480)``. (Remembered: the
    sets of a frame are mostly the sets of the frame before.)"""
    text = fold_nodeset(members)
    if len(text) > room:
        cut = text.rfind(",", 0, room)
        text = (text[:cut] if cut > 0 else text[:room]) + ",…"
        if text.count("[") > text.count("]"):
            text += "]"
    return f"{text} ({len(members)})"


def _set_row(
    key: str,
    members: Sequence[FleetRow],
    entered: Mapping[str, datetime | None],
    now: datetime,
    *,
    expanded: bool,
    indent: str = "",
) -> FleetRow:
    first = members[0].cells
    names = tuple(r.node for r in members)
    waves = sorted({int(r.cells[1]) for r in members})
    wave = str(waves[0]) if len(waves) == 1 else f"{waves[0]}-{waves[-1]}"
    times = [at for at in (entered.get(n) for n in names) if at is not None]
    cells = list(first)
    cells[0] = indent + (EXPANDED_MARK if expanded else FOLDED_MARK) + nodeset_label(names)
    cells[1] = wave
    cells[-1] = since(min(times) if times else None, now)  # the longest in the stage
    return FleetRow(names[0], tuple(cells), members=names, fold=key, expanded=expanded, tones=members[0].tones)


def _expansion(
    key: str,
    members: Sequence[FleetRow],
    entered: Mapping[str, datetime | None],
    now: datetime,
    expanded: Collection[str],
) -> list[FleetRow]:
    """What follows an expanded set's row: its nodes, or, for a set of more than
    :data:`EXPAND_CHUNK` nodes, node sets of that many each (``KEY#0``, ``KEY#1``, …), each
    expanded in turn on demand: a table of a few dozen rows, never thousands."""
    if len(members) <= EXPAND_CHUNK:
        return [replace(m, fold=key) for m in members]
    out: list[FleetRow] = []
    for start in range(0, len(members), EXPAND_CHUNK):
        chunk = members[start : start + EXPAND_CHUNK]
        chunk_key = f"{key}#{start // EXPAND_CHUNK}"
        opened = chunk_key in expanded
        out.append(_set_row(chunk_key, chunk, entered, now, expanded=opened, indent="  "))
        if opened:
            out.extend(replace(m, fold=chunk_key) for m in chunk)
    return out


def fold_rows(
    rows: Sequence[FleetRow],
    *,
    pinned: Collection[str],
    entered: Mapping[str, datetime | None],
    now: datetime,
    expanded: Collection[str] = frozenset(),
    fold_above: int = FOLD_ABOVE,
) -> list[FleetRow]:
    """Nodes' rows (fleet order) with the nodes alike folded into node-set rows, each at the
    place of its first node; an ``expanded`` set (by its key) is followed by its nodes' rows
    (:func:`_expansion`). ``pinned`` nodes keep their own rows; ``entered``: when each node
    entered its stage (a set's "In stage" is its longest). A fleet of at most ``fold_above``
    nodes is unchanged."""
    if len(rows) <= fold_above:
        return list(rows)
    groups: dict[str, list[FleetRow]] = {}
    keys: list[str | None] = []
    for row in rows:
        key = None if row.node in pinned else fold_key(row)
        keys.append(key)
        if key is not None:
            groups.setdefault(key, []).append(row)
    out: list[FleetRow] = []
    placed: set[str] = set()
    for row, key in zip(rows, keys, strict=True):
        if key is None or len(groups[key]) < FOLD_MIN:
            out.append(row)
        elif key not in placed:
            placed.add(key)
            members = groups[key]
            opened = key in expanded
            out.append(_set_row(key, members, entered, now, expanded=opened))
            if opened:
                out.extend(_expansion(key, members, entered, now, expanded))
    return out


def fleet_rows(
    state: CockpitState,
    live: Mapping[str, NodeState],
    now: datetime,
    *,
    narrow: bool = False,
    expanded: Collection[str] = frozenset(),
    fold_above: int = FOLD_ABOVE,
) -> list[FleetRow]:
    """The fleet table's rows: one per node, folded into node sets above ``fold_above``
    nodes (``expanded``: the keys of the sets shown with their nodes)."""
    rows = [fleet_row(progress, live.get(name), now, narrow=narrow) for name, progress in state.nodes.items()]
    if len(rows) <= fold_above:
        return rows
    entered = {name: p.entered_at for name, p in state.nodes.items()}
    return fold_rows(
        rows, pinned=pinned_nodes(state), entered=entered, now=now, expanded=expanded, fold_above=fold_above
    )


class FleetRows:
    """:func:`fleet_rows`, remembered between frames: the clock ticks every second, and a
    big fleet's rows are worked out again only when the state moved (a new event), a live
    probe came in, or the width or the expanded sets changed; between those, only each
    row's time in stage is said anew. (2,000 nodes' rows and their fold cost tens of
    milliseconds; a tick of a folded fleet costs a few rows.)"""

    def __init__(self) -> None:
        self._sig: tuple[object, ...] | None = None
        self._live: tuple[NodeState, ...] = ()  # held, so that identity stands for "unchanged"
        self._rows: list[FleetRow] = []
        self._entered: list[datetime | None] = []  # per row: the time its "In stage" counts from

    def rows(
        self,
        state: CockpitState,
        live: Mapping[str, NodeState],
        now: datetime,
        *,
        narrow: bool = False,
        expanded: Collection[str] = frozenset(),
    ) -> list[FleetRow]:
        values = tuple(live.values())
        sig = (id(state), state.last_seq, len(state.nodes), tuple(live), narrow, frozenset(expanded))
        same_live = len(values) == len(self._live) and all(a is b for a, b in zip(values, self._live, strict=True))
        if sig != self._sig or not same_live:
            self._sig, self._live = sig, values
            self._state = state  # held too: its id stays its own while remembered
            self._rows = fleet_rows(state, live, now, narrow=narrow, expanded=expanded)
            self._entered = [self._since_of(state, row) for row in self._rows]
            return self._rows
        out = []
        for row, at in zip(self._rows, self._entered, strict=True):
            cell = since(at, now)
            out.append(row if row.cells[-1] == cell else replace(row, cells=(*row.cells[:-1], cell)))
        self._rows = out
        return out

    @staticmethod
    def _since_of(state: CockpitState, row: FleetRow) -> datetime | None:
        if not row.is_set:
            progress = state.nodes.get(row.node)
            return None if progress is None else progress.entered_at
        times = [t for t in (state.nodes[n].entered_at for n in row.members if n in state.nodes) if t is not None]
        return min(times) if times else None


def row_for(rows: Sequence[FleetRow], node: str) -> FleetRow | None:
    """The row that shows ``node``: its own, or the node-set row it is folded into."""
    for row in rows:
        if row.node == node and not row.is_set:
            return row
    return next((row for row in rows if node in row.members and not row.expanded), None)
