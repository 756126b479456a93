"""UTS #39 confusables, the subset a person's name needs: each character that Unicode's
``confusables.txt`` gives an ASCII letter or digit as its prototype, by that prototype (casefolded).

Generated from the ``confusables.json`` of confusable-homoglyphs 3.3.1 (PyPI; MIT; its data
is Unicode's confusables.txt, Unicode license): for each ASCII letter or digit, its
single-character confusables, each kept under the prototype with the most of them (``1`` and
``I`` under ``l``, ``0`` under ``O``), leaving out those NFKD already turns into another
character (fullwidth and mathematical letters: :func:`~cockpit.changelog.identity.person_key`
applies NFKD first), then casefolded. Added by hand: ``i`` under ``l`` (a capital ``I`` after
casefolding), ``1`` under ``l`` and ``0`` under ``o``: ASCII look-alikes of each other are
mapped only so. Multi-character prototypes (``rn`` for ``m``) are not in it.
"""

from __future__ import annotations

#: prototype -> the characters that read as it
PROTOTYPES: dict[str, str] = {
    "2": "ƧƨϨϩᒿꙄꙅꛯꝚꝛ",
    "3": "ƷȜȝɜʒЗзӠӡⳌⳍꝪꝫꞫ𑣊𖼻𝈆",
    "4": "Ꮞ𑢯𑣏",
    "5": "Ƽƽ𑢻𑣛",
    "6": "бᏮⳒⳓ𑣕",
    "7": "𐓒𐓺𑣆𝈒",
    "8": "Ȣȣ৪੪ଃ𐌚",
    "9": "৭੧୨൭ⳊⳋꝮꝯ𑢬𑣌𑣖",
    "a": "ɑΑαАаᎪᗅ⍺ꓮ𐊠𖽀",
    "b": "ƄƅΒβВЬвьᏏᏴᑲᖯᗷꓐꞴꞵ𐊂𐊡𐌁",
    "c": "СсᏟᴄⲤⲥꓚꮯ𐊢𐌂𐐕𐐽𐔜𑣩𑣲🝌",
    "d": "ԁᎠᏧᑯᗞᗪꓒꓓ",
    "e": "ΕεЕеҽᎬ℮⋿ⴹꓰꬲ𐊆𑢦𑢮𑣆𑣎",
    "f": "ϜϝքᖴẝꓝꞘꞙꬵ𐊇𐊥𐔥𑢢𑣂𝈓",
    "g": "ƍɡԌԍցᏀᏳᶃꓖ",
    "h": "ΗηНнһհᎻᏂᕼⲎⲏꓧ𐋏",
    "i": "ıɩɪιіӏᎥ⍳ꙇꭵ𑣃",
    "j": "ʝͿϳЈјᎫᒍꓙꞲ",
    "k": "ΚκКкᏦᛕⲔⲕꓗ𐔘",
    "l": "1iƖǀɩΙιІіӀӏ۱Ꮮᒪᛁ∣⏽ⲒⲓⳐⳑⵏꓡꓲ𐊊𐌉𐌠𐐛𐑃𐔦𑢣𑢲𑣃𑣒𖼖𖼨𝈪",
    "m": "ΜμϺϻМмᎷᗰᛖⲘⲙꓟ𐊰𐌑",
    "n": "ΝνոռⲚⲛꓠ𐔓",
    "o": "0ΟοσОоՕօ۵०০੦૦ଠ୦௦ం౦ಂ೦ംഠ൦ං๐໐ဝ၀ჿዐᴏᴑⲞⲟⵔ〇ꓳꬽ𐊒𐊫𐐄𐐬𐓂𐓪𐔖𑓐𑢵𑣈𑣕𑣗𑣠",
    "p": "ΡρРрᏢᑭ⍴Ⲣⲣꓑ𐊕",
    "q": "ԛգզⵕ",
    "r": "ƦʀгᎡᎱᏒᖇᴦⲅꓣꭇꭈꮁ𐒴𐓜𖼵𝈖",
    "s": "ƽЅѕՏտᏕᏚꓢꜱꮪ𐊖𐐠𐑈𑣁𖼺",
    "t": "ΤτТтᎢ⊤⟙Ⲧⲧꓔ𐊗𐊱𐌕𑢼𑣜𖼊🝨",
    "u": "ʋυՍսሀᑌᴜ∪⋃ꓴꞟꭎꭒ𐓎𐓶𑢸𑣘𖽂",
    "v": "νѴѵ۷Ꮩᐯᴠ∨⋁ⴸꓦꛟꮩ𐔝𑜆𑢠𑣀𖼈𝈍",
    "w": "ɯѡԜԝաᎳᏔᴡꓪꮃ𑜊𑜎𑜏𑣦𑣯",
    "x": "×ΧχХхᕁᕽ᙭᙮ᚷ╳⤫⤬⨯ⲬⲭⵝꓫꞳꭓ𐊐𐊴𐌗𐌢𐔧𑣬",
    "y": "ɣʏΥγυУуҮүყᎩᎽᶌỿⲨⲩꓬꭚ𐊲𑢤𑣄𑣜𖽃",
    "z": "ΖζᏃᴢꓜꮓ𐋵𑢩𑣄𑣉𑣥",
}

#: ``str.translate`` table: each look-alike to its prototype
SKELETON: dict[int, str] = {ord(c): proto for proto, chars in PROTOTYPES.items() for c in chars}
