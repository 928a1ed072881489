"""JSON Schema ``format`` values as regular languages: the strings the generation language writes
for each format it supports (docs/design.md §5.1).

Each format is a tuple of regexes (Python's dialect, ASCII, all fullmatched: the string is in their
intersection), written so that every string they match is valid for the format under RFC 3339
(date, time, date-time, duration), RFC 1123 (hostname), RFC 5321 (email), RFC 2673/4291 (ipv4,
ipv6), RFC 4122 (uuid), RFC 3986 (uri, uri-reference), RFC 3987 (iri), RFC 6531 (idn-email),
RFC 4648 (OpenAPI's byte: base64), ECMA-262 (regex), and for the ``jsonschema`` package's
format checker. They are *subsets* where the full format is not worth its states (stated per
entry); a format not listed here is refused by :func:`ltlagent.text.schemaread.parse_schema`
unless its caller asks to
read unknown formats as annotations.
"""

from __future__ import annotations

__all__ = ["FORMATS"]

_D2 = "[0-9]{2}"
#: Years 0001-9999 (Python's ``date`` has no year 0) and the leap ones among them.
_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_LEAP_YY = "(?:0[48]|[2468][048]|[13579][26])"
_LEAP = f"(?:[0-9]{{2}}{_LEAP_YY}|{_LEAP_YY}00)"
_MONTH_DAY = ("(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              "|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP}-02-29)"
_OFFSET = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#: RFC 3339 full-time, upper-case T and Z only, no leap second (60): validators differ on it.
_TIME = f"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{{1,9}})?{_OFFSET}"
_N = "[0-9]{1,9}"
_DUR_TIME = f"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
_DUR_DATE = f"(?:{_N}Y(?:{_N}M(?:{_N}D)?)?|{_N}M(?:{_N}D)?|{_N}D)"
_DURATION = f"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_N}W)"
#: A host name of at most six labels of 1-41 letters, digits and inner hyphens (at most 251
#: characters, under RFC 1123's 253), no "--" anywhere (IDNA reserves it at positions 3-4).
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,39}[A-Za-z0-9])?"
_HOSTNAME = f"{_LABEL}(?:\\.{_LABEL}){{0,5}}"
_NO_DOUBLE_HYPHEN = "[^-]*(?:-[^-]+)*-?"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"


def _ipv6() -> str:
    """RFC 3986's IPv6address (no zone)."""
    def upto(n: int) -> str:
        return f"(?:(?:{_H16}:){{0,{n}}}{_H16})?" if n >= 0 else ""
    alts = [f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}",
            f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}", f"{upto(1)}::(?:{_H16}:){{3}}{_LS32}",
            f"{upto(2)}::(?:{_H16}:){{2}}{_LS32}", f"{upto(3)}::{_H16}:{_LS32}",
            f"{upto(4)}::{_LS32}", f"{upto(5)}::{_H16}", f"{upto(6)}::"]
    return "(?:" + "|".join(alts) + ")"


#: An e-mail address: a dot-atom local part at the host names above (no quoted local parts, no
#: address literals: a subset of RFC 5321's Mailbox).
_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_EMAIL = f"{_ATOM}(?:\\.{_ATOM}){{0,3}}@{_HOSTNAME}"
#: RFC 3986's URI without IP literals in the authority (a reg-name or IPv4 host).
_UNRESERVED = "A-Za-z0-9._~\\-"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_AUTHORITY = (f"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
              "(?::[0-9]*)?")
_URI = (f"[A-Za-z][A-Za-z0-9+.-]*:(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
        f"|{_PCHAR}+(?:/{_PCHAR}*)*)?(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?")

_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})"
_QF = f"(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
#: RFC 3986's relative-ref (same restriction on the authority).
_RELATIVE = (f"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
             f"|{_NC}+(?:/{_PCHAR}*)*)?{_QF}")

#: Format name → regexes a string of that format fullmatches (all of them).
FORMATS: dict[str, tuple[str, ...]] = {
    "date": (_DATE,),
    "time": (_TIME,),
    "date-time": (f"{_DATE}T{_TIME}",),
    "duration": (_DURATION,),
    "email": (_EMAIL, _NO_DOUBLE_HYPHEN),
    "hostname": (_HOSTNAME, _NO_DOUBLE_HYPHEN),
    "ipv4": (_IPV4,),
    "ipv6": (_ipv6(),),
    "uuid": ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",),
    "uri": (_URI,),
    "uri-reference": (f"(?:{_URI}|{_RELATIVE})",),
    # Supersets of the above, written as them: an IRI is a URI that may hold non-ASCII characters
    # (RFC 3987), idn-email an e-mail address with them (RFC 6531).
    "iri": (_URI,),
    "iri-reference": (f"(?:{_URI}|{_RELATIVE})",),
    "idn-email": (_EMAIL, _NO_DOUBLE_HYPHEN),
    # Formats outside the specification that real schemas use (OpenAPI's byte, the common url),
    # and regex: a literal pattern, optionally anchored (a subset of ECMA-262 and of Python's re).
    "url": (_URI,),
    "byte": ("(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",),
    "regex": (r"\^?[A-Za-z0-9_ .]*\$?",),
}
