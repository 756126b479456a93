"""The reviewer's side of a pair review: follow a live change log, sign off what needs a second person.

A :class:`ReviewerSession` never folds from memory. It follows the operator's file
with a :class:`~cockpit.changelog.journal.JournalFollower` (only the bytes appended since the
last poll are parsed) into the same :class:`~cockpit.engine.fold.Folder` the operator
uses, so both see one state. Its own events (sign-offs, manual triggers, notes) are
judged by :func:`~cockpit.engine.rules.check_action` as the reviewer, appended through a
non-exclusive :class:`~cockpit.changelog.journal.Journal`, and then folded like everyone
else's, in file order, by the next poll.

The operator's process learns of them through ``Session.absorb_foreign()``.
"""

from __future__ import annotations

import errno
import getpass
import os
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from cockpit.changelog.chain import ChainReport
from cockpit.changelog.events import Event, EventKind, utcnow
from cockpit.changelog.facts import TriggerFiredFacts
from cockpit.changelog.identity import DEMO_OPERATOR, PERSON_NAME, check_person_name, same_person
from cockpit.changelog.journal import Journal, JournalFollower, SessionHeader, TornTail
from cockpit.changelog.reader import follower_after, read_session_folding
from cockpit.changelog.runbook_of import runbook_candidates as runbook_candidates  # where it lived
from cockpit.changelog.runbook_of import session_runbook as session_runbook
from cockpit.changelog.sshsig import Signer
from cockpit.changelog.trust import load_site_trust
from cockpit.engine.actions import (
    REVIEWER_ACTIONS,
    Action,
    ActionRefused,
    Note,
    RaiseTrigger,
    SignOff,
    Verdict,
)
from cockpit.engine.fold import Folder
from cockpit.engine.judge import refused_words
from cockpit.engine.offers import allowed_actions
from cockpit.engine.rules import check_action
from cockpit.engine.state import CockpitState
from cockpit.errors import BadInput
from cockpit.runbook.model import Runbook
from cockpit.session.notes import kept_note

#: A reviewer's refused intent is the same refusal as the operator's.
ReviewRefused = ActionRefused
#: how many of the newest events the reviewer keeps for the view's log
RECENT_KEPT = 500


def default_reviewer() -> str:
    """The login name (what ``--as`` defaults to)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or "reviewer"


def append_refused(path: Path) -> str | None:
    """Why this process could not append to the session file ``path``, or None.

    Opening it for writing changes nothing in it; the folder must take a write too (a torn
    tail is moved aside there before the first append)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path} is a symbolic link (someone may have planted it)"
        return f"{path} is read-only for you ({os.strerror(exc.errno).lower() if exc.errno else exc})"
    os.close(fd)
    if not os.access(path.parent, os.W_OK):
        return f"its folder {path.parent} is read-only for you"
    return None


class ReviewerSession(AbstractContextManager["ReviewerSession"]):
    """A second person on a live session: follows it, signs off, raises manual triggers, adds notes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        reviewer: str,
        *,
        clock: Callable[[], datetime] = utcnow,
        signer: Signer | None = None,
    ) -> None:
        self.path = Path(path)
        self.reviewer = reviewer.strip()
        if not PERSON_NAME.fullmatch(self.reviewer):  # demo names are judged once the header is read
            check_person_name(reviewer, "--as")
        #: the newest events, in order (the view's log shows the last few; a 100,000-event log
        #: is folded as it is read, never kept whole)
        self.events: deque[Event] = deque(maxlen=RECENT_KEPT)
        self.signer = signer
        self.clock = clock
        self._journal: Journal | None = None  # opened at the first append: a reviewer who only watches writes nothing
        signatures: dict[int, str] = {}  # filled by the reader chunk by chunk, before each is folded

        def fold(header: SessionHeader, events: list[Event]) -> None:
            if not hasattr(self, "folder"):
                self._start(header, signatures)  # judged on the header, before anything is folded
            self.folder.apply_all(events)  # the reader has the collector paused meanwhile
            self.events.extend(events)

        log = read_session_folding(self.path, fold, signatures=signatures)  # BadInput: missing, damaged, newer
        if not hasattr(self, "folder"):
            self._start(log.header, signatures)
        self._read = log
        self.follower: JournalFollower = follower_after(log)  # from here on only what is appended is read
        #: the reviewer's own copy of the head as it goes (:mod:`cockpit.changelog.anchor`)
        self.anchors = load_site_trust().anchor_sinks()
        if self.follower.signatures is not None:
            self.follower.signatures = signatures  # one dict: the follower adds, the fold reads

    def _start(self, header: SessionHeader, signatures: dict[int, str]) -> None:
        """Judge the reviewer against the header, then find the runbook and start the fold."""
        self.header: SessionHeader = header
        check_person_name(self.reviewer, "--as", demo=same_person(header.operator, DEMO_OPERATOR))
        if same_person(self.reviewer, header.operator):
            raise BadInput(
                f"{self.reviewer} is the operator of {header.change_id} ({header.operator}): "
                "a review needs a second person (pass --as with the reviewer's own name)"
            )
        refused = append_refused(self.path)
        if refused is not None:
            # refused at start, not at the first sign-off: a review exists to sign, and a person
            # who only watches has the operator's screen read-only (cockpit pair's tmux attach -r)
            raise BadInput(
                f"cannot review {header.change_id}: {refused}; a reviewer appends sign-offs, triggers and "
                "notes to it (ask the operator for write access, or watch read-only with the tmux attach -r "
                "command cockpit pair prints)"
            )
        self.loaded = session_runbook(header, self.path)
        self.runbook: Runbook = self.loaded.runbook
        required = load_site_trust().with_runbook(self.loaded).require_for(header)  # the site's and the runbook's
        self.folder = Folder(
            self.runbook,
            header.window_parameters(),
            header.hosts,
            operator=header.operator,
            signatures=signatures if required else None,  # the follower checks the rest
        )

    # ------------------------------------------------------------------ reading

    @property
    def state(self) -> CockpitState:
        return self.folder.state

    @property
    def operator(self) -> str:
        return self.header.operator

    @property
    def change_id(self) -> str:
        return self.header.change_id

    @property
    def torn(self) -> TornTail | None:
        """A partial block at the end of the file as of the last poll (a writer mid-append or crashed)."""
        return self.follower.torn

    def integrity(self) -> str:
        """The chain as followed so far, the sign-offs' signatures, the head: the screen's first line."""
        f = self.follower
        sigs = "signatures not required" if f.signatures is None else f"{len(f.signatures)} event(s) validly signed"
        refused = refused_words(self.state.refused)  # the fold judged each event
        return f"{f.chain_words()}; {sigs}; head {f.last_seq}:{f.head}" + (f"; {refused}" if refused else "")

    def poll(self) -> list[Event]:
        """Fold what was appended since the last poll; return those events."""
        events = self.follower.poll()
        self.folder.apply_all(events)
        self.events.extend(events)
        if events and self.anchors:  # the reviewer's own copy of the head: the operator cannot rewrite it
            try:
                self.anchors.record(self.header.change_id, self.follower.last_seq, self.follower.head)
            except OSError as exc:
                self.anchors.failure = f"anchor file {self.anchors.file}: {exc.strerror or exc}"
        return events

    def verdict(self, action: Action) -> Verdict:
        return check_action(self.state, self.runbook, action, self.reviewer, operator=self.operator)

    def allowed(self) -> list[Action]:
        """What the reviewer may do now (actions that need words are listed without them)."""
        return allowed_actions(self.state, self.runbook, self.reviewer, self.operator)

    def pending_signoffs(self) -> list[SignOff]:
        """The sign-offs the reviewer could give now, per item, in the cockpit's order."""
        return [a for a in self.allowed() if isinstance(a, SignOff) and a.item is not None]

    # ------------------------------------------------------------------ acting

    def perform(self, action: Action) -> Event:
        """Judge ``action`` as the reviewer on the latest state and append it; raise :class:`ReviewRefused`.

        Anything but a sign-off, a manual trigger or a note is refused by the gate
        (only the operator runs steps, passes or overrides gates).
        """
        self.poll()
        verdict = self.verdict(action)
        if not verdict.allowed:
            raise ReviewRefused(action, verdict.reasons)
        if action.kind not in REVIEWER_ACTIONS:  # the gate already says so; never write one anyway
            raise ReviewRefused(action, [f"a reviewer cannot {action.kind.value}"])
        journal = self._open()
        if isinstance(action, SignOff):
            window = action.stage in self.state.window
            event = journal.append(
                EventKind.SIGNOFF,
                stage=action.stage,
                item=action.item,
                node=None if window else action.node,
                note=action.note,
            )
        elif isinstance(action, RaiseTrigger):
            event = journal.append(
                EventKind.TRIGGER_FIRED,
                trigger=action.trigger,
                node=action.node,
                note=action.note,
                facts=TriggerFiredFacts(evidence=f"raised by {self.reviewer}: {action.note}"),
            )
        elif isinstance(action, Note):
            event = journal.append(EventKind.NOTE, node=action.node, note=action.text)
        else:  # the gate and REVIEWER_ACTIONS already refused it
            raise ReviewRefused(action, [f"a reviewer cannot {action.kind.value}"])
        self.poll()  # fold our event with whatever came before it, in file order
        return event

    def sign_off(
        self, stage: str, item: str | None = None, node: str | None = None, *, note: str | None = None
    ) -> Event:
        return self.perform(SignOff(stage=stage, item=item, node=node, note=note))

    def raise_trigger(self, trigger: str, node: str | None = None, *, note: str) -> Event:
        return self.perform(RaiseTrigger(trigger=trigger, node=node, note=note))

    def note(self, text: str, node: str | None = None) -> Event:
        if not text.strip():
            raise BadInput("a note needs some text")
        return self.perform(Note(node=node, text=kept_note(text.strip(), self._open().store_artifact)))

    def _open(self) -> Journal:
        if self._journal is None:
            # what was read (and followed since) is handed over: the first append does not parse the file again
            f = self.follower
            broken = f.chain_broken
            known = replace(
                self._read,
                events=list(self.events)[-1:],
                torn=f.torn,
                end_offset=f.offset,
                tail_seq=f.last_seq,
                chain=ChainReport(
                    chained=f.chained,
                    head=f.head,
                    broken_at=broken[0] if broken else None,
                    why=broken[1] if broken else None,
                ),
                blocks=(),
            )
            self._journal = Journal.open_for_append(
                self.path, self.reviewer, exclusive=False, clock=self.clock, signer=self.signer, log=known
            )
        return self._journal

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def __exit__(self, *exc: object) -> None:
        self.close()
