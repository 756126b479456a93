"""Who a name in the change log stands for, decided once.

The two-person rule compares people, not strings: ``alice``, ``Alice``, ``ALICE``,
``alice.``, ``"alice"``, ``alice@localhost``, ``CORP\\alice`` and ``alíce`` are all the
operator ``alice`` and none of them may sign her gate. Every comparison of two actors
goes through :func:`person_key`, which errs on the side of calling two spellings the
same person: a false match only refuses a sign-off, a false difference would let one
person satisfy a control meant for two.

Look-alike letters of other scripts count as the letter they imitate (UTS #39's
confusable skeleton, :mod:`cockpit.changelog.confusables`): ``аlice`` with a Cyrillic
``а``, ``a1ice`` and ``aIice`` are ``alice`` too, wherever the name comes from (a
hand-edited log, an allowed_signers line). The cost is the same as above, on purpose:
``i``, ``l`` and ``1`` are one letter to the key, and ``0`` is ``o``.

Names a person types are checked at the edge by :func:`check_person_name` (one line,
exit 2), so the log only ever gets the plain forms; the key still handles whatever a
hand-edited log holds. A name that mixes scripts (:func:`mixed_scripts`) is refused there.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from cockpit.changelog.confusables import SKELETON
from cockpit.errors import BadInput

#: The actor of what the cockpit itself records (probes, automatic triggers): never a person.
SYSTEM_ACTOR = "cockpit"
#: The simulated people of ``cockpit demo``; they exist only in sessions on the simulated fleet.
DEMO_OPERATOR = "demo-operator"
DEMO_REVIEWER = "demo-reviewer"

#: What a person's name may look like when typed (it becomes an event's actor).
PERSON_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")

_DOMAIN_PREFIX = re.compile(r"^[^\\/]*[\\/]")  # CORP\alice, corp/alice


@functools.lru_cache(maxsize=4096)  # pure; a log compares the same few names 100,000 times
def person_key(name: str) -> str:
    """The one form two names are compared in: the same key means the same person.

    Compatibility-normalised and case-folded, accents dropped, a ``DOMAIN\\`` prefix and
    an ``@host`` or ``@domain`` suffix removed, and every character that is not a letter
    or digit left out (so punctuation around or inside a name changes nothing).
    """
    # the confusable skeleton: each look-alike as the letter it imitates (twice: a prototype
    # reached once may itself read as another, as the capital I's "i" reads as "l")
    return spelling_key(name).translate(SKELETON).translate(SKELETON)


@functools.lru_cache(maxsize=4096)
def spelling_key(name: str) -> str:
    """:func:`person_key` before the confusable skeleton: two names with the same person key
    but different spelling keys are look-alikes (``a1ice``, ``аӏісе`` in Cyrillic, for ``alice``),
    not two spellings of one name (``Alice``, ``alice@corp``)."""
    text = unicodedata.normalize("NFKD", name).casefold()
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = _DOMAIN_PREFIX.sub("", text.strip())
    text = text.split("@", 1)[0] if not text.startswith("@") else text
    return "".join(ch for ch in text if ch.isalnum())


def mixed_scripts(name: str) -> str | None:
    """The scripts a name's letters come from, in words, when more than one ("Latin and
    Cyrillic"); None for a name in one script. A mixed name exists to pass for another."""
    scripts: list[str] = []
    for ch in unicodedata.normalize("NFKD", name):
        if not ch.isalpha():
            continue
        script = unicodedata.name(ch, "UNKNOWN").split(" ")[0].capitalize()
        if script not in scripts:
            scripts.append(script)
    return " and ".join(scripts) if len(scripts) > 1 else None


def same_person(a: str | None, b: str | None) -> bool:
    """Whether two actors are the same person (an empty key matches nobody but itself)."""
    if a is None or b is None:
        return False
    return person_key(a) == person_key(b)


def is_system(actor: str) -> bool:
    return actor == SYSTEM_ACTOR


def check_person_name(name: str, flag: str, *, demo: bool = False) -> str:
    """A name a person gave (``--operator``, ``--as``), or :class:`BadInput` in one line.

    Demo identities are refused outside the demo, and the cockpit's own actor always.
    """
    cleaned = name.strip()
    mixed = mixed_scripts(cleaned)
    if mixed:
        raise BadInput(f"{flag} {name!r}: a name mixing {mixed} letters can pass for someone else's")
    if not PERSON_NAME.fullmatch(cleaned):
        raise BadInput(
            f"{flag} {name!r}: a name is 1-64 letters, digits, '.', '_', '@' or '-' (first a letter or digit)"
        )
    if not person_key(cleaned):
        raise BadInput(f"{flag} {name!r}: a name needs at least one letter or digit")
    if same_person(cleaned, SYSTEM_ACTOR):
        raise BadInput(f"{flag} {name!r}: {SYSTEM_ACTOR!r} is the cockpit's own name, not a person's")
    if not demo and any(same_person(cleaned, d) for d in (DEMO_OPERATOR, DEMO_REVIEWER)):
        raise BadInput(f"{flag} {name!r}: that is a demo identity; it exists only in `cockpit demo` sessions")
    return cleaned
