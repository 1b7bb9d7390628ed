"""Toy data sets made in code (seeded, nothing downloaded), and scores for the heads they grow.

- ``repeated_tokens``: random tokens repeated with a period; the second copy is predictable
  only by looking back (induction heads, Olsson et al. 2022, arxiv.org/abs/2209.11895).
- ``ChainTask``: a fixed random map f over the tokens ("facts" a model must store) and chains
  x, f(x), f(f(x)), ...; one-step items ask for f(x), k-step items for f applied k times.
- ``previous_token_score`` and ``induction_score``: how much of a head's attention goes where
  a previous-token head or an induction head would look.

Every generator argument is a ``torch.Generator`` (``torch.Generator().manual_seed(0)``).
"""
from __future__ import annotations

import torch


def _check_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")


def repeated_tokens(n_seqs, seq_len, d_vocab, period, generator=None) -> torch.Tensor:
    """Random tokens repeated with a period: row b is t_0 .. t_{p-1} t_0 .. t_{p-1} t_0 ...

    Args:
        n_seqs, seq_len: rows and columns of the result.
        d_vocab: tokens are drawn uniformly from 0 .. d_vocab-1.
        period: an int p (every row), or a pair (low, high): each row draws its own p in
            low..high, so a model cannot predict from the position alone and must look at content.
    Returns:
        (n_seqs, seq_len) int64.
    """
    low, high = (period, period) if isinstance(period, int) else period
    _check_int("n_seqs", n_seqs)
    _check_int("seq_len", seq_len)
    _check_int("d_vocab", d_vocab)
    _check_int("period", low)
    _check_int("period", high, minimum=low)
    p = torch.randint(low, high + 1, (n_seqs, 1), generator=generator)       # (n_seqs, 1)
    base = torch.randint(0, d_vocab, (n_seqs, high), generator=generator)    # (n_seqs, high)
    index = torch.arange(seq_len)[None, :] % p                               # (n_seqs, seq_len)
    return base.gather(1, index)


class ChainTask:
    """A fixed random permutation f of 0 .. d_vocab-1 and the chains it makes.

    A model that learns next-token prediction on ``sequences`` must store f (d_vocab facts) in its
    weights.  A k-step item starts from x and asks for f(x), f(f(x)), ... k tokens in a row: one
    wrong fact anywhere spoils it, so an item of k steps is right about p^k of the time if each
    fact is right with probability p (lesson 3: short tests hide what long ones show).

    Args:
        d_vocab: tokens (and facts).
        seed: picks f.
        skew: start tokens are drawn with probability proportional to 1 / (rank + 1)^skew over a
            random ranking of the tokens; 0 (default) is uniform, larger makes some facts rare.
    """

    def __init__(self, d_vocab: int, seed: int = 0, skew: float = 0.0):
        _check_int("d_vocab", d_vocab, minimum=2)
        if not skew >= 0:
            raise ValueError(f"skew={skew!r} must be >= 0")
        g = torch.Generator().manual_seed(seed)
        self.d_vocab = d_vocab
        self.f = torch.randperm(d_vocab, generator=g)  # (d_vocab,): f[x] is the fact about x
        rank = torch.randperm(d_vocab, generator=g)    # (d_vocab,): rank of each start token
        self.start_probs = 1.0 / (rank + 1.0) ** skew
        self.start_probs /= self.start_probs.sum()     # (d_vocab,), sums to 1

    def starts(self, n, generator=None) -> torch.Tensor:
        """(n,) start tokens drawn from ``start_probs``."""
        return torch.multinomial(self.start_probs, n, replacement=True, generator=generator)

    def follow(self, x, n_steps) -> torch.Tensor:
        """x: (n,) tokens -> (n, n_steps): f(x), f(f(x)), ... ."""
        out = []
        for _ in range(n_steps):
            x = self.f[x]
            out.append(x)
        return torch.stack(out, dim=1) if out else torch.empty(len(x), 0, dtype=torch.long)

    def sequences(self, n_seqs, seq_len, generator=None) -> torch.Tensor:
        """(n_seqs, seq_len) chains x, f(x), f(f(x)), ... from random starts (training data)."""
        _check_int("seq_len", seq_len)
        x = self.starts(n_seqs, generator)                              # (n_seqs,)
        return torch.cat([x[:, None], self.follow(x, seq_len - 1)], 1)  # (n_seqs, seq_len)

    def items(self, n_steps, starts=None) -> tuple[torch.Tensor, torch.Tensor]:
        """k-step items: prompts (n, 1) and answers (n, n_steps).  ``starts`` defaults to every
        token once (n = d_vocab)."""
        _check_int("n_steps", n_steps)
        x = torch.arange(self.d_vocab) if starts is None else starts
        return x[:, None], self.follow(x, n_steps)

    def accuracy(self, model, n_steps, starts=None) -> float:
        """Fraction of ``n_steps``-step items a model gets wholly right, generating greedily
        (``model.generate(prompts, n_steps)``, as course_lib.TinyGPT)."""
        prompts, answers = self.items(n_steps, starts)
        with torch.no_grad():
            out = model.generate(prompts, n_steps)[:, 1:]  # (n, n_steps): drop the prompt
        return (out == answers).all(dim=1).float().mean().item()


def previous_token_score(pattern) -> torch.Tensor:
    """Mean attention from each position to the one just before it.

    Args:
        pattern: (..., pos, pos) attention weights (query, key), e.g. (n_heads, pos, pos).
    Returns:
        (...,) in [0, 1]: 1 for a perfect previous-token head.  Position 0 has no previous token
        and is left out.
    """
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)  # (...,)


def induction_score(pattern, period) -> torch.Tensor:
    """Mean attention to where an induction head looks, on ``repeated_tokens`` of this period.

    From position i >= period the current token also sat at i - period, i - 2·period, ...; an
    induction head attends to the token *after* each earlier copy (positions i - period + 1,
    i - 2·period + 1, ...) and predicts that it comes next.  With two copies (pos = 2·period)
    that is the single position i - period + 1.

    Args:
        pattern: (..., pos, pos) attention weights (query, key) on tokens repeated with ``period``.
        period: the repeat length p (1 <= p < pos).
    Returns:
        (...,) in [0, 1]: 1 for a perfect induction head.  Queries before position p (no earlier
        copy yet) are left out.
    """
    pos = pattern.shape[-1]
    if isinstance(period, bool) or not isinstance(period, int) or not 1 <= period < pos:
        raise ValueError(f"period={period!r} must be an integer in 1..{pos - 1} (pos={pos})")
    i = torch.arange(pos)[:, None]  # (pos, 1) query positions
    j = torch.arange(pos)[None, :]  # (1, pos) key positions
    after_a_copy = (j <= i - period + 1) & ((i - j + 1) % period == 0)  # (pos, pos)
    per_query = (pattern * after_a_copy).sum(-1)  # (..., pos): weight on those keys
    return per_query[..., period:].mean(-1)       # (...,)


def head_scores(model, period=10, n_seqs=100, seed=123) -> dict:
    """Previous-token and induction scores of every head of ``model`` on ``repeated_tokens``.

    Args:
        model: has ``attention_patterns(tokens)`` -> (n_layers, batch, n_heads, pos, pos) and a
            ``shape`` (a ModelShape: n_ctx and d_vocab are used), like course_lib.TinyGPT.
        period, n_seqs, seed: the evaluation data (fixed period, its own seed).
    Returns:
        {"previous_token": (n_layers, n_heads), "induction": (n_layers, n_heads)} tensors, each
        score averaged over the sequences.
    """
    g = torch.Generator().manual_seed(seed)
    tokens = repeated_tokens(n_seqs, model.shape.n_ctx, model.shape.d_vocab, period, g)
    with torch.no_grad():
        pattern = model.attention_patterns(tokens).mean(1)  # (n_layers, n_heads, pos, pos)
    return {"previous_token": previous_token_score(pattern),
            "induction": induction_score(pattern, period)}
