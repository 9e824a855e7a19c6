"""The shared number formats (cuda_llm/report/formats.py): a missing figure reads "-" without its unit."""

from __future__ import annotations

import pytest

from cuda_llm.report.formats import fmt_fixed


@pytest.mark.parametrize("value, digits, unit, text", [
    (41.6, 0, "%", "42%"),
    (72.0, 0, "", "72"),
    (0.8751, 2, "", "0.88"),
    (3.0, 1, " s", "3.0 s"),
    (None, 0, "%", "-"),
    (None, 2, "", "-"),
])
def test_fmt_fixed_gives_the_digits_and_unit_or_a_bare_dash(value, digits, unit, text):
    assert fmt_fixed(value, digits, unit) == text


def test_fmt_fixed_defaults_to_one_decimal_and_no_unit():
    assert fmt_fixed(2.26) == "2.3" and fmt_fixed(None) == "-"
