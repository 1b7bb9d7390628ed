"""course_lib.plots: the bars add up to the counts, labels carry the totals, bad input is refused."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import course_lib as cl  # noqa: E402
from course_lib import plots  # noqa: E402

NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "Llama-2-7b-hf")


@pytest.fixture
def cards():
    yield [cl.load_card(n) for n in NAMES]
    plt.close("all")


def _bars_per_model(ax):
    """{legend label: [bar width per model, in the order given (drawn top to bottom)]}."""
    return {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers}


def test_parts_of_sums_to_the_total(cards):
    for s in cards:
        assert sum(plots.parts_of(s).values()) == cl.count_params(s).total


def test_share_bars_add_up_to_100_and_match_the_counts(cards):
    ax = plots.params_by_part(cards)
    bars = _bars_per_model(ax)
    for i, s in enumerate(cards):
        assert sum(widths[i] for widths in bars.values()) == pytest.approx(100)
        c = cl.count_params(s)
        assert bars["feed-forward"][i] == pytest.approx(100 * c.feed_forward / c.total)
    # GPT-2 has no router and a tied head; Llama an untied head: only parts someone has
    assert "router" not in bars and "output head (untied)" in bars
    assert bars["output head (untied)"][:3] == [0, 0, 0]
    assert bars["position embedding"][3] == 0  # rotary positions have no parameters


def test_absolute_bars_are_in_millions(cards):
    ax = plots.params_by_part(cards, share=False)
    bars = _bars_per_model(ax)
    total = sum(widths[0] for widths in bars.values())
    assert total == pytest.approx(124.439808)
    assert "millions" in ax.get_xlabel()


def test_labels_name_each_model_with_its_total(cards):
    ax = plots.params_by_part(cards)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("gpt2\n124.4M") and labels[-1].startswith("Llama-2-7b-hf\n6.74B")


def test_draws_on_a_given_axes(cards):
    fig, (a, b) = plt.subplots(1, 2)
    assert plots.params_by_part(cards[:1], ax=b) is b
    assert not a.containers


def test_empty_is_refused():
    with pytest.raises(ValueError, match="shapes is empty"):
        plots.params_by_part([])


@pytest.mark.parametrize("n, text", [(124_439_808, "124.4M"), (6_738_415_616, "6.74B"),
                                     (3072, "3.07k"), (512, "512"), (68_976_648_192, "69B"),
                                     (774_030_080, "774.0M")])
def test_human_count(n, text):
    assert plots.human_count(n) == text


def test_the_two_views_have_their_own_titles(cards):
    shares = plots.params_by_part(cards).get_title()
    scale = plots.params_by_part(cards, share=False).get_title()
    assert shares != scale and "share" in shares and "one scale" in scale
