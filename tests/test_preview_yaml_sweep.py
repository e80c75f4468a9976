"""``slicectl/cmd_preview.py`` ``yaml_text`` emits libyaml events itself: over adversarial values (strings YAML
would read as another type or must quote, long and multi-line and non-ASCII text, non-string keys, empty and
nested collections, None, floats' special values, big ints) its text is ``yaml.dump``'s, byte for byte, and reads
back as the value."""

from __future__ import annotations

import math

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slicectl import cmd_preview

TRICKY = ["yes", "no", "on", "off", "y", "n", "Y", "True", "FALSE", "null", "Null", "~", "", " ", "0x1", "0o7",
          "017", "0b1", "1e3", "1.0", ".5", "-.inf", ".NaN", "1_000", "12:30:00", "2001-12-14", "2001-12-14t21:59:43Z",
          ":", "a: b", "#", "a #b", "- x", "-", "?", "!tag", "&a", "*a", "|", ">", "%x", "@x", "`x", "'", '"', "{}",
          "[]", ",", " lead", "trail ", "\tx", "a\nb", "a\n", "\n", "é", "日本", "\u2028", "\x85", "\ufeff", "\x00",
          "=", "<<", "x" * 200, " ".join(["word"] * 60), "a\n\n b  \n"]


def dumped(doc):
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=False)


text = st.one_of(st.sampled_from(TRICKY), st.text(max_size=120),
                 st.lists(st.sampled_from([*TRICKY, "a", " ", "\n", "word"]), max_size=30).map("".join))
scalars = st.one_of(text, st.none(), st.booleans(), st.integers(), st.integers(min_value=-2**200, max_value=2**200),
                    st.floats(), st.sampled_from([0.0, -0.0, math.inf, -math.inf, 1e-5, 1e16, 123456789.0]))
keys = st.one_of(text, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
documents = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(keys, inner, max_size=4)), max_leaves=25)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, documents, max_size=5))
def test_yaml_text_is_yaml_dumps_text(doc):
    assert cmd_preview.yaml_text(doc) == dumped(doc)


def test_each_tricky_string_as_key_and_value_and_in_a_list():
    for s in TRICKY:
        for doc in ({s: s}, {"k": [s, {s: [s]}]}, {"k": {"": [], s: {}}}):
            assert cmd_preview.yaml_text(doc) == dumped(doc), repr(s)
            if "\x00" not in s and "\ufeff" not in s:
                assert yaml.safe_load(cmd_preview.yaml_text(doc)) == doc, repr(s)
