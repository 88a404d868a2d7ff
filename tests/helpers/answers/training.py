"""Chapter answers for ``tests/unit/test_checks_training.py`` (and the verdict tests that
judge the same answers through a record): the right and the catalogued wrong
implementations, written as a student would."""

from __future__ import annotations

import math

import numpy as np
import torch

from autograder.checks import table
from autograder.checks import training as TR

# {function: check key} of the chapter (the exercise table)
KEY = table.keys("08_training")


# every exercise of the chapter: {check key: its Check declaration} (the exercise table)
CHECKS = table.declarations("08_training")


# ---------------------------------------------------------------- right answers
def good_get_batch(data, batch_size, block_size, generator=None):
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    win = np.stack([data[s : s + block_size + 1] for s in starts.tolist()]).astype(np.int64)
    win = torch.from_numpy(win)
    return win[:, :-1], win[:, 1:]


def good_ce(logits, targets):
    z = logits.flatten(0, -2)
    t = targets.flatten()
    m = z.amax(-1, keepdim=True)
    lse = (z - m).exp().sum(-1).log() + m.squeeze(-1)
    return (lse - z.gather(1, t[:, None]).squeeze(1)).mean()


def good_lr(step, max_lr, min_lr, warmup_iters, max_iters):
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= max_iters:
        return min_lr
    frac = (step - warmup_iters) / (max_iters - warmup_iters)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * frac)) / 2


def _clip_(params, c, per_param=False, values=False):
    grads = [p.grad for p in params if p.grad is not None]
    with torch.no_grad():
        if values:
            for g in grads:
                g.clamp_(-c, c)
            return
        if per_param:
            for g in grads:
                g.mul_(min(1.0, c / (g.norm().item() + 1e-6)))
            return
        total = math.sqrt(sum(float((g**2).sum()) for g in grads))
        for g in grads:
            g.mul_(min(1.0, c / (total + 1e-6)))


def step_fn(zero=True, zero_mid=False, clip="global", clip_after=False, loss_after=False,
            clip_first=False, clip_before_backward=False):
    def train_step(model, optimizer, x, y, grad_clip):
        if zero:
            optimizer.zero_grad()
        if clip_first:
            norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
            for p in model.parameters():
                p.grad.mul_(min(1.0, grad_clip / float(norm)))
        loss = good_ce(model(x), y)
        if clip_before_backward:  # issue 18 trial: clips the (None) gradients, skipping None
            _clip_(list(model.parameters()), grad_clip)
        loss.backward()
        if zero_mid:
            optimizer.zero_grad()
        params = list(model.parameters())
        if clip and not clip_after and not clip_before_backward:
            _clip_(params, grad_clip, per_param=clip == "per-param", values=clip == "values")
        optimizer.step()
        if clip_after:
            _clip_(params, grad_clip)
        if loss_after:
            with torch.no_grad():
                return good_ce(model(x), y).item()
        return loss.item()

    return train_step


good_step = step_fn()


def step_hand_norm(kind, eps=1e-6):
    """The global norm written out with torch (mutation testing, issue 18), ``eps`` added to
    it in the scale."""
    def train_step(model, optimizer, x, y, grad_clip):
        optimizer.zero_grad()
        loss = good_ce(model(x), y)
        if kind != "nobackward":
            loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        with torch.no_grad():
            if kind == "mean":  # the mean square of each tensor
                total = torch.sqrt(sum(g.pow(2).mean() for g in grads))
            elif kind == "nosqrt":  # the squared norm
                total = sum(g.pow(2).sum() for g in grads)
            else:
                total = torch.sqrt(sum(g.pow(2).sum() for g in grads))
            for g in grads:
                g.mul_(min(1.0, grad_clip / (float(total) + eps)))
        optimizer.step()
        return loss.item()

    return train_step


def eval_fn(eval_mode=True, restore=True, no_grad=True, reduce="mean", one=False,
            collect=True, first=0, extra=0):
    def estimate_loss(model, data, batch_size, block_size, eval_iters, generator=None):
        was = model.training
        if eval_mode:
            model.eval()
        losses = []
        with torch.set_grad_enabled(not no_grad):
            for _ in range(1) if one else range(first, eval_iters + extra):
                x, y = good_get_batch(data, batch_size, block_size, generator)
                loss = float(good_ce(model(x), y))
                if collect:
                    losses.append(loss)
        if restore:
            model.train(was)
        if reduce == "last":
            return losses[-1]
        return sum(losses) if reduce == "sum" else sum(losses) / len(losses)

    return estimate_loss


good_eval = eval_fn()


def ckpt_fns(optimizer=True, step=True, generator=True, gen_object=False, opt_object=False,
             assign=False, write=True, weights=True):
    def save(path, model, opt, step_, gen):
        state = {"weights": model.state_dict(), "step": step_}
        if optimizer:
            state["opt"] = opt if opt_object else opt.state_dict()
        if generator:
            state["rng"] = gen if gen_object else gen.get_state()
        if write:
            torch.save(state, path)

    def load(path, model, opt, gen):
        state = torch.load(path, weights_only=not gen_object)
        if weights:
            model.load_state_dict(state["weights"], assign=assign)  # assign: new parameters
        if "opt" in state:
            opt.load_state_dict(state["opt"].state_dict() if opt_object else state["opt"])
        if "rng" in state:
            gen.set_state(state["rng"])
        return state["step"] if step else 0

    return save, load


def sampler(temp="divide", k="largest", p="exclusive", p_first=False, greedy=True,
            fill=-math.inf, keepdim=True, axis=-1, cum_axis=-1, greedy_axis=-1, cap_k=True,
            draw=True, given=True):
    def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if greedy and temperature == 0:
            return torch.argmax(logits, dim=greedy_axis, keepdim=keepdim)
        z = logits.clone()

        def tempered(z):
            if temp == "divide":
                return z / temperature
            return z * temperature if temp == "multiply" else z

        if not p_first:
            z = tempered(z)
        if top_k is not None:
            kk = min(top_k, z.size(-1)) if cap_k else top_k
            kth = torch.topk(z, kk, largest=k != "smallest").values[:, -1:]
            keep = z <= kth if k == "smallest" else z > kth if k == "strict" else z >= kth
            if k == "unassigned":
                z.masked_fill(~keep, fill)  # the result thrown away
            else:
                z = z.masked_fill(~keep, fill)
        if top_p is not None:
            if p == "unsorted":
                probs = torch.softmax(z, -1)
                drop = probs.cumsum(-1) - probs >= top_p
                drop[:, 0] = False
                z[drop] = -math.inf
            else:
                zs, idx = z.sort(-1, descending=p != "ascending")
                probs = zs.softmax(-1)
                cum = probs.cumsum(cum_axis)
                drop = cum >= top_p if p == "inclusive" else cum - probs >= top_p
                drop[:, 0] = False
                if p == "inverted":
                    drop = ~drop
                if p == "unassigned":
                    z.scatter(-1, idx, zs.masked_fill(drop, fill))  # the result thrown away
                else:
                    z = z.scatter(-1, idx, zs.masked_fill(drop, fill))
        if p_first:
            z = tempered(z)
        if not draw:  # the most probable token every time
            return z.softmax(axis).argmax(-1, keepdim=True)
        if not given:  # (False: torch's global generator, not the given one)
            return torch.multinomial(z.softmax(axis), 1)
        return torch.multinomial(z.softmax(axis), 1, generator=generator)

    return sample_next_token


def adamw(kind=""):
    """A student's AdamW class; ``kind`` names one slip (``""``: right)."""

    class AdamW(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                     weight_decay=0.0 if kind == "adam_defaults" else 0.01):
            super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                      "weight_decay": weight_decay})
            self.lr, self.wd, self.n = lr, weight_decay, 0

        def step(self, closure=None):
            with torch.no_grad():
                for group in self.param_groups:
                    lr = self.lr if kind == "lr_once" else group["lr"]
                    beta1, beta2 = group["betas"]
                    if kind == "betas_swapped":
                        beta2, beta1 = group["betas"]
                    wd = self.wd if kind == "one_decay" else group["weight_decay"]
                    for p in group["params"]:
                        if kind == "skip_wrong_ones":
                            if p.grad is not None:
                                continue
                        elif p.grad is None and kind != "no_skip":
                            continue
                        st = self.state[p]
                        if "m" not in st:
                            st["m"] = torch.ones_like(p) if kind == "m_ones" \
                                else torch.zeros_like(p)
                            st["v"] = torch.ones_like(p) if kind == "v_ones" \
                                else torch.zeros_like(p)
                            st["k"] = 1 if kind == "count_from_1" else 0
                        st["k"] += 1
                        self.n += 1
                        k = self.n if kind == "shared_count" else st["k"]
                        grad = p.grad
                        if kind == "l2":
                            grad = grad + wd * p
                        elif kind == "decay_no_lr":
                            p -= wd * p
                        elif kind == "decay_grows":
                            p += lr * wd * p
                        elif kind == "decay_lr_only":
                            p *= 1 - lr
                        elif kind == "decay_divided":
                            p *= 1 - lr / wd
                        elif kind not in ("decay_last", "no_decay"):
                            p -= lr * wd * p
                        if kind == "m_sum":
                            st["m"] = beta1 * st["m"] + grad
                        else:
                            st["m"] = beta1 * st["m"] + (1 - beta1) * grad
                        if kind == "v_sum":
                            st["v"] = beta2 * st["v"] + grad**2
                        else:
                            st["v"] = beta2 * st["v"] + (1 - beta2) * grad**2
                        if kind == "no_correction":
                            mh, vh = st["m"], st["v"]
                        else:
                            mh = st["m"] if kind == "no_m_correction" else (
                                st["m"] * (1 - beta1**k) if kind == "m_times"
                                else st["m"] / (1 + beta1**k) if kind == "m_plus"
                                else st["m"] / (1 - beta1**k))
                            vh = st["v"] if kind == "no_v_correction" else (
                                st["v"] * (1 - beta2**k) if kind == "v_times"
                                else st["v"] / (1 + beta2**k) if kind == "v_plus"
                                else st["v"] / (1 - beta2**k))
                        if kind == "eps_in_sqrt":
                            p -= lr * mh / torch.sqrt(vh + group["eps"])
                        elif kind == "paper_eps":  # Adam's paper: eps before the correction
                            step_size = lr * math.sqrt(1 - beta2**k) / (1 - beta1**k)
                            p -= step_size * st["m"] / (st["v"].sqrt() + group["eps"])
                        elif kind == "no_sqrt":
                            p -= lr * mh / (vh + group["eps"])
                        elif kind == "no_eps":
                            p -= lr * mh / vh.sqrt()
                        elif kind == "no_lr":
                            p -= mh / (vh.sqrt() + group["eps"])
                        elif kind == "no_m":
                            p -= lr / (vh.sqrt() + group["eps"])
                        elif kind == "times_root":
                            p -= lr * mh * (vh.sqrt() + group["eps"])
                        elif kind == "momentum_sgd":
                            p -= lr * mh
                        elif kind == "plus":
                            p += lr * mh / (vh.sqrt() + group["eps"])
                        elif kind != "forgot_update":
                            p -= lr * mh / (vh.sqrt() + group["eps"])
                        if kind == "decay_last":
                            p -= lr * wd * p

    return AdamW


class AdamWWithoutSuper(torch.optim.Optimizer):
    """Keeps its own settings and never calls Optimizer.__init__."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params = list(params)

    def step(self, closure=None):
        return len(self.param_groups)


class AdamWWithoutNoGrad(torch.optim.Optimizer):
    """Forgets torch.no_grad(): the in-place update of a leaf that requires grad fails."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(1 - group["lr"] * group["weight_decay"])


GOOD = {
    KEY["get_batch"]: (good_get_batch,),
    KEY["cross_entropy"]: (good_ce,),
    KEY["get_lr"]: (good_lr,),
    KEY["train_step"]: (good_step,),
    KEY["AdamW"]: (adamw(),),
    KEY["estimate_loss"]: (good_eval,),
    KEY["checkpoint"]: ckpt_fns(),
    KEY["sample_next_token"]: (sampler(),),
}


PUBLIC = {
    KEY["get_batch"]: TR.check_get_batch,
    KEY["cross_entropy"]: TR.check_cross_entropy,
    KEY["get_lr"]: TR.check_get_lr,
    KEY["train_step"]: TR.check_train_step,
    KEY["AdamW"]: TR.check_AdamW,
    KEY["estimate_loss"]: TR.check_estimate_loss,
    KEY["checkpoint"]: TR.check_checkpoint,
    KEY["sample_next_token"]: TR.check_sample_next_token,
}


# ---------------------------------------------------------------- students' wrong answers
def gb(shift=1, swap=False, high=0, long_x=False, dtype=np.int64, whole=False, convert="xy"):
    def get_batch(data, batch_size, block_size, generator=None):
        n = len(data) if whole else len(data) - block_size + high
        ix = torch.randint(n, (batch_size,), generator=generator)
        x = np.stack([data[i : i + block_size + long_x] for i in ix.tolist()])
        y = np.stack([data[i + shift : i + shift + block_size] for i in ix.tolist()])
        x = torch.from_numpy(x.astype(dtype) if "x" in convert else x)
        y = torch.from_numpy(y.astype(dtype) if "y" in convert else y)
        return (y, x) if swap else (x, y)

    return get_batch


def ce(kind):
    def cross_entropy(logits, targets):
        z = logits.reshape(-1, logits.shape[-1])
        t = targets.reshape(-1)
        rows = torch.arange(len(t))
        if kind == "naive":
            logp = torch.log(torch.exp(z) / torch.exp(z).sum(1, keepdim=True))
            return -logp[rows, t].mean()
        if kind == "softmax":
            return -torch.log(torch.softmax(z, dim=1)[rows, t]).mean()
        if kind == "global":
            m = z.max()
            return (m + torch.log(torch.exp(z - m).sum(1)) - z[rows, t]).mean()
        if kind == "axis0":
            m = z.max(0, keepdim=True).values
            logp = z - m - torch.log(torch.exp(z - m).sum(0, keepdim=True))
            return -logp[rows, t].mean()
        if kind == "raw":
            return -z[rows, t].mean()
        if kind in ("max0", "sum0", "lsemean"):
            m = z.max(0 if kind == "max0" else 1, keepdim=True).values
            e = torch.exp(z - m)
            s = (e.sum(0, keepdim=True) if kind == "sum0" else e.mean(1, keepdim=True)
                 if kind == "lsemean" else e.sum(1, keepdim=True))
            return -(z - m - torch.log(s))[rows, t].mean()
        if kind in ("plusm", "mminusz", "addedback", "mminuslog", "lsemax", "zpluslse"):
            m = z.max(dim=1, keepdim=True).values
            if kind == "plusm":
                lse = m + torch.exp(z + m).sum(1, keepdim=True).log()
            elif kind == "mminusz":
                lse = m + torch.exp(m - z).sum(1, keepdim=True).log()
            elif kind == "addedback":
                lse = m + torch.exp(z).sum(1, keepdim=True).log()
            elif kind == "mminuslog":
                lse = m - torch.exp(z - m).sum(1, keepdim=True).log()
            else:
                lse = m if kind == "lsemax" else m + torch.exp(z - m).sum(1, keepdim=True).log()
            logp = z + lse if kind == "zpluslse" else z - lse
            return -logp[rows, t].mean()
        loss = good_ce(z, t) * len(t) if kind == "sum" else good_ce(z, t)
        return -loss if kind == "sign" else loss

    return cross_entropy


def lr(kind):
    def get_lr(step, max_lr, min_lr, warmup_iters, max_iters):
        if kind == "warmflat" and step < warmup_iters:
            return max_lr / warmup_iters
        if kind == "warm1" and step < warmup_iters:
            return (step + 1) / warmup_iters
        if kind == "warminv" and step < warmup_iters:
            return max_lr * warmup_iters / (step + 1)
        if kind not in ("nowarm", "nobranch") and step < warmup_iters:
            return max_lr * (step if kind == "from0" else step + 1) / warmup_iters
        if step > max_iters and kind != "noclamp":
            return min_lr
        if kind in ("nowarm", "origin"):
            frac = step / max_iters
        elif kind == "overmax":
            frac = (step - warmup_iters) / max_iters
        elif kind == "stepdecay":
            frac = step / (max_iters - warmup_iters)
        elif kind == "unscaled":
            frac = step - warmup_iters
        else:
            frac = (step - warmup_iters) / (max_iters - warmup_iters)
        if kind == "linear":
            return max_lr - (max_lr - min_lr) * frac
        if kind == "half":
            return min_lr + (max_lr - min_lr) * math.cos(math.pi * frac / 2)
        if kind == "tozero":
            return max_lr * 0.5 * (1 + math.cos(math.pi * frac))
        if kind == "amp":
            return min_lr + max_lr * 0.5 * (1 + math.cos(math.pi * frac))
        if kind == "nohalf":
            return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * frac))
        if kind == "nopi":
            return min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(frac))
        if kind == "nodecay":
            return max_lr
        if kind == "nor":
            return min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(math.pi))
        if kind == "oneminus":
            return min_lr + (max_lr - min_lr) * (1 - math.cos(math.pi * frac)) / 2
        if kind == "noone":
            return min_lr + (max_lr - min_lr) * 0.5 * math.cos(math.pi * frac)
        if kind == "minus":
            return min_lr + (min_lr - max_lr) * 0.5 * (1 + math.cos(math.pi * frac))
        return min_lr + (max_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * frac))

    return get_lr


def lr_warm_first(step, max_lr, min_lr, warmup_iters, max_iters):
    warm = max_lr * (step + 1) / warmup_iters  # computed before the branch: fails for W = 0
    return warm if step < warmup_iters else good_lr(step, max_lr, min_lr, warmup_iters,
                                                     max_iters)


# (check key, wrong implementation(s), catalogue name expected in the message)
# No clipping, clipping after step() and clipping before backward() train identically: one
# name covers all three (issue 18 trial: clipping before backward() was named "no clipping").
CLIP_MISSING = "no gradient clipping in effect (none, before backward(), or after step())"


WRONG = [
    (KEY["get_batch"], (gb(shift=0),), "y not shifted (y = x)"),
    (KEY["get_batch"], (gb(swap=True),), "x and y swapped"),
    (KEY["get_batch"], (gb(high=-1),),
     "starts drawn below len(data) - block_size - 1 (off by one)"),
    (KEY["get_batch"], (gb(long_x=True),), "x has block_size + 1 tokens"),
    (KEY["get_batch"], (gb(dtype=np.uint16),), "ids kept as the data's uint16"),
    (KEY["cross_entropy"], (ce("naive"),), "not stabilised: exp of the raw logits overflows"),
    (KEY["cross_entropy"], (ce("softmax"),), "log of softmax in two steps (log 0 = -inf)"),
    (KEY["cross_entropy"], (ce("global"),),
     "subtracted the global max instead of each row's max"),
    (KEY["cross_entropy"], (ce("axis0"),),
     "normalised over the batch axis (axis 0) instead of the vocabulary"),
    (KEY["cross_entropy"], (ce("raw"),), "left out the log-sum-exp (loss = -z[target])"),
    (KEY["cross_entropy"], (ce("sum"),), "summed instead of averaged over the tokens"),
    (KEY["cross_entropy"], (ce("sign"),), "forgot the minus sign"),
    (KEY["get_lr"], (lr("from0"),), "warm-up starts at 0 (max_lr * step / warmup_iters)"),
    (KEY["get_lr"], (lr("tozero"),), "cosine decays to 0 instead of min_lr"),
    (KEY["get_lr"], (lr("amp"),), "cosine amplitude is max_lr instead of max_lr - min_lr"),
    (KEY["get_lr"], (lr("origin"),),
     "cosine progress measured from step 0, not from the end of the warm-up"),
    (KEY["get_lr"], (lr("nowarm"),), "no warm-up"),
    # mutation testing (issue 18)
    (KEY["get_lr"], (lr("nobranch"),),
     "warm-up branch left out (the cosine also runs during the warm-up)"),
    (KEY["get_lr"], (lr("nohalf"),), "cosine factor without the 1/2"),
    (KEY["get_lr"], (lr("half"),), "half a cosine (cos(pi r / 2))"),
    (KEY["get_lr"], (lr("linear"),), "linear decay instead of cosine"),
    (KEY["get_lr"], (lr("noclamp"),), "the cosine comes back up after max_iters"),
    (KEY["get_lr"], (lr_warm_first,), "division by zero without a warm-up"),
    # mutation testing (issue 18): the start bound, the log-sum-exp's axes and sum, the
    # cosine's progress and its pi
    (KEY["get_batch"], (gb(whole=True),),
     "starts drawn from the whole of data (randint(len(data)))"),
    (KEY["get_batch"], (gb(convert="y"),),
     "x left as the data's uint16 (only y converted to int64)"),
    (KEY["get_batch"], (gb(convert="x"),),
     "y left as the data's uint16 (only x converted to int64)"),
    (KEY["cross_entropy"], (ce("max0"),), "the max taken over the batch axis (dim=0)"),
    (KEY["cross_entropy"], (ce("sum0"),), "exp(z - m) summed over the batch axis (dim=0)"),
    (KEY["cross_entropy"], (ce("lsemean"),), "mean instead of sum inside the log-sum-exp"),
    # mutation testing (issue 32): the signs of the shift and around the log of the sum
    (KEY["cross_entropy"], (ce("plusm"),),
     "exp(z + m): the max added inside exp instead of subtracted"),
    (KEY["cross_entropy"], (ce("mminusz"),), "exp(m - z) instead of exp(z - m)"),
    (KEY["cross_entropy"], (ce("addedback"),),
     "the max added back but never subtracted inside exp"),
    (KEY["cross_entropy"], (ce("mminuslog"),),
     "m - log(sum(exp(z - m))): the log of the sum subtracted from the max"),
    (KEY["cross_entropy"], (ce("lsemax"),),
     "the row's max used as the log-sum-exp (the log of the sum left out)"),
    (KEY["cross_entropy"], (ce("zpluslse"),),
     "log p = z + logsumexp(z) (the normaliser added instead of subtracted)"),
    (KEY["get_lr"], (lr("overmax"),),
     "cosine progress divided by max_iters, not by the decay's length"),
    (KEY["get_lr"], (lr("stepdecay"),), "cosine progress from step 0 over the decay's length"),
    (KEY["get_lr"], (lr("nopi"),), "cos(r) instead of cos(pi r)"),
    # mutation testing (issue 32): the warm-up's ramp, r's scale, the cosine factor, the sign
    (KEY["get_lr"], (lr("warmflat"),),
     "the warm-up does not ramp (step left out: max_lr / warmup_iters throughout)"),
    (KEY["get_lr"], (lr("warm1"),), "the warm-up ramps to 1, not to max_lr (max_lr left out)"),
    (KEY["get_lr"], (lr("warminv"),),
     "the warm-up fraction upside down (warmup_iters / (step + 1))"),
    (KEY["get_lr"], (lr("unscaled"),),
     "cosine progress not divided by the decay's length (r = step - warmup_iters)"),
    (KEY["get_lr"], (lr("nodecay"),), "no decay after the warm-up (the rate stays at max_lr)"),
    (KEY["get_lr"], (lr("nor"),),
     "the rate drops to min_lr right after the warm-up (cos(pi) without r?)"),
    (KEY["get_lr"], (lr("oneminus"),),
     "1 - cos(pi r) instead of 1 + cos(pi r): the rate rises after the warm-up"),
    (KEY["get_lr"], (lr("noone"),), "0.5 * cos(pi r) without the 1 +"),
    (KEY["get_lr"], (lr("minus"),),
     "the cosine term subtracted from min_lr (the rate goes below min_lr)"),
    (KEY["train_step"], (step_fn(zero=False),),
     "forgot optimizer.zero_grad(): gradients accumulate across steps"),
    (KEY["train_step"], (step_fn(zero_mid=True),), "zero_grad() between backward() and step()"),
    (KEY["train_step"], (step_fn(clip=None),), CLIP_MISSING),
    (KEY["train_step"], (step_fn(clip_after=True),), CLIP_MISSING),
    (KEY["train_step"], (step_fn(clip_before_backward=True),), CLIP_MISSING),
    (KEY["train_step"], (step_fn(clip="per-param"),),
     "clipped each parameter's gradient separately instead of the global norm"),
    (KEY["train_step"], (step_fn(clip="values"),),
     "clipped gradient values instead of the norm"),
    (KEY["train_step"], (step_fn(loss_after=True),), "returned the loss after the update"),
    (KEY["train_step"], (step_fn(clip_first=True),),
     "a gradient is None (clipped before backward()?)"),
    # mutation testing (issue 18): the global norm's square root and sum, backward() left out
    (KEY["train_step"], (step_hand_norm("nosqrt"),),
     "clipped by the squared norm (no square root)"),
    (KEY["train_step"], (step_hand_norm("mean"),),
     "the norm from each gradient's mean of squares instead of the sum"),
    (KEY["train_step"], (step_hand_norm("nobackward"),),
     "no gradient to clip (loss.backward() missing?)"),
    (KEY["AdamW"], (adamw("l2"),),
     "L2 penalty added to the gradient (Adam + L2) instead of decoupled decay"),
    (KEY["AdamW"], (adamw("no_correction"),), "no bias correction"),
    (KEY["AdamW"], (adamw("decay_no_lr"),), "weight decay not multiplied by the learning rate"),
    (KEY["AdamW"], (adamw("eps_in_sqrt"),), "eps inside the square root"),
    (KEY["AdamW"], (adamw("paper_eps"),), "eps added before the bias correction of v"),
    (KEY["AdamW"], (adamw("no_sqrt"),), "update divided by v_hat, not its square root"),
    (KEY["AdamW"], (adamw("one_decay"),),
     "every group decayed with the constructor's weight_decay (groups ignored)"),
    (KEY["AdamW"], (adamw("no_decay"),), "no weight decay"),
    (KEY["AdamW"], (adamw("decay_last"),),
     "decay applied after the Adam update (to the updated weights)"),
    (KEY["AdamW"], (adamw("shared_count"),), "one step counter shared by all parameters"),
    (KEY["AdamW"], (adamw("betas_swapped"),), "beta1 and beta2 swapped"),
    (KEY["AdamW"], (adamw("adam_defaults"),),
     "constructor defaults of Adam (weight_decay 0) instead of AdamW's 1e-2"),
    # a schedule writes group["lr"] between steps
    (KEY["AdamW"], (adamw("lr_once"),),
     "learning rate read once in __init__ (a schedule's group['lr'] ignored)"),
    # parameters without a gradient at some steps
    (KEY["AdamW"], (adamw("no_skip"),), "a parameter without a gradient (p.grad is None)"),
    (KEY["AdamW"], (AdamWWithoutNoGrad,), "step() changes the weights with autograd on"),
    (KEY["AdamW"], (AdamWWithoutSuper,), "super().__init__ not called"),
    (KEY["AdamW"], (adamw("no_m_correction"),), "bias correction of m left out"),
    (KEY["AdamW"], (adamw("no_v_correction"),), "bias correction of v left out"),
    (KEY["AdamW"], (adamw("m_times"),), "m multiplied by 1 - beta1^t instead of divided"),
    (KEY["AdamW"], (adamw("v_times"),), "v multiplied by 1 - beta2^t instead of divided"),
    (KEY["AdamW"], (adamw("m_sum"),), "m accumulates g without the factor 1 - beta1"),
    (KEY["AdamW"], (adamw("v_sum"),), "v accumulates g² without the factor 1 - beta2"),
    (KEY["AdamW"], (adamw("plus"),), "the step goes up the gradient (the update's sign flipped)"),
    (KEY["AdamW"], (adamw("decay_grows"),), "weight decay with the wrong sign (the weights grow)"),
    (KEY["AdamW"], (adamw("no_lr"),), "learning rate left out of the Adam step"),
    (KEY["AdamW"], (adamw("no_m"),),
     "m_hat left out of the Adam step (lr / (sqrt(v_hat) + eps))"),
    (KEY["AdamW"], (adamw("no_eps"),), "eps left out of the denominator"),
    (KEY["AdamW"], (adamw("forgot_update"),),
     "the Adam step never applied (the weights only decay)"),
    (KEY["AdamW"], (adamw("skip_wrong_ones"),),
     "no parameter updated (the p.grad is None test inverted?)"),
    (KEY["AdamW"], (adamw("count_from_1"),), "step count off by one (t = 2 at the first step)"),
    (KEY["AdamW"], (adamw("m_ones"),), "m started at 1 instead of 0"),
    (KEY["AdamW"], (adamw("decay_lr_only"),), "decay factor 1 - lr (weight_decay left out)"),
    (KEY["AdamW"], (adamw("decay_divided"),), "division by a weight decay of 0"),
    (KEY["AdamW"], (adamw("times_root"),),
     "the step multiplied by sqrt(v_hat) + eps instead of divided"),
    (KEY["AdamW"], (adamw("momentum_sgd"),),
     "the step not divided by sqrt(v_hat) + eps (momentum SGD)"),
    (KEY["AdamW"], (adamw("m_plus"),), "m corrected by 1 + beta1^t"),
    (KEY["AdamW"], (adamw("v_plus"),), "v corrected by 1 + beta2^t"),
    (KEY["AdamW"], (adamw("v_ones"),), "v started at 1 instead of 0"),
    (KEY["estimate_loss"], (eval_fn(eval_mode=False),),
     "forgot model.eval(): dropout is still on"),
    (KEY["estimate_loss"], (eval_fn(reduce="last"),),
     "returned the last batch's loss, not the mean"),
    (KEY["estimate_loss"], (eval_fn(reduce="sum"),),
     "summed the batch losses instead of averaging"),
    (KEY["estimate_loss"], (eval_fn(one=True),),
     "evaluated one batch only (eval_iters ignored)"),
    # mutation testing (issue 18): the losses never appended
    (KEY["estimate_loss"], (eval_fn(collect=False),),
     "no loss collected (the list of losses stays empty)"),
    # mutation testing (issue 32): the loop's bounds
    (KEY["estimate_loss"], (eval_fn(extra=1),), "one batch too many (range(eval_iters + 1))"),
    (KEY["estimate_loss"], (eval_fn(first=1),), "one batch too few (range(1, eval_iters))"),
    (KEY["checkpoint"], ckpt_fns(optimizer=False),
     "saved the model only (AdamW's moments restart at zero)"),
    (KEY["checkpoint"], ckpt_fns(step=False),
     "the step was not restored (the schedule restarts at warm-up)"),
    (KEY["checkpoint"], ckpt_fns(generator=False),
     "the batch generator's state was not saved (other batches after the resume)"),
    (KEY["checkpoint"], ckpt_fns(gen_object=True),
     "saved the generator object instead of its state"),
    (KEY["checkpoint"], ckpt_fns(opt_object=True),
     "torch.load refuses a Python object (weights_only)"),
    (KEY["checkpoint"], ckpt_fns(assign=True), "parameters replaced, not loaded in place"),
    # mutation testing (issue 18): the model not loaded, the file never written
    (KEY["checkpoint"], ckpt_fns(weights=False), "the model's weights were not loaded"),
    (KEY["checkpoint"], ckpt_fns(write=False),
     "nothing was written to path (torch.save missing?)"),
    # "drawn with torch.multinomial(probs, 1, generator=generator)" (issue 49: passed both)
    (KEY["sample_next_token"], (sampler(given=False),), "drew without the given generator"),
    (KEY["sample_next_token"], (sampler(temp="multiply"),),
     "multiplied the logits by the temperature instead of dividing"),
    (KEY["sample_next_token"], (sampler(temp="ignore"),), "temperature ignored"),
    (KEY["sample_next_token"], (sampler(p_first=True),),
     "top-p applied before the temperature"),
    (KEY["sample_next_token"], (sampler(k="smallest"),), "kept the k smallest logits"),
    (KEY["sample_next_token"], (sampler(p="inclusive"),),
     "top-p drops the token that crosses p"),
    (KEY["sample_next_token"], (sampler(p="unsorted"),),
     "top-p measured on the unsorted probabilities"),
    (KEY["sample_next_token"], (sampler(greedy=False),), "temperature 0 divides by zero"),
    # mutation testing (issue 18): a filter's result not kept, top-k's boundary, the fill
    # value, top-p's sort order and mask, the greedy ids' shape
    (KEY["sample_next_token"], (sampler(k="unassigned"),),
     "top-k filter not applied (masked_fill's result not kept?)"),
    (KEY["sample_next_token"], (sampler(k="strict"),),
     "top-k keeps k - 1 tokens (<= instead of <)"),
    (KEY["sample_next_token"], (sampler(fill=0.0),), "filtered logits set to 0 instead of -inf"),
    (KEY["sample_next_token"], (sampler(p="ascending"),),
     "top-p on the probabilities sorted in increasing order"),
    (KEY["sample_next_token"], (sampler(p="unassigned"),),
     "top-p filter not applied (masked_fill's result not kept?)"),
    (KEY["sample_next_token"], (sampler(p="inverted"),),
     "top-p mask inverted (the nucleus dropped, the tail kept)"),
    (KEY["sample_next_token"], (sampler(keepdim=False),),
     "the ids returned as (B,), not (B, 1) (keepdim=True left out?)"),
    (KEY["sample_next_token"], (sampler(axis=0),),
     "softmax over the batch axis (dim=0) instead of the vocabulary"),
    (KEY["sample_next_token"], (sampler(cum_axis=0),),
     "top-p's cumulative mass summed down the batch (dim=0)"),
    # mutation testing (issue 32): argmax instead of a draw, the greedy axis, top_k over V
    (KEY["sample_next_token"], (sampler(draw=False),),
     "took the most probable token instead of drawing one (argmax, not a sample)"),
    (KEY["sample_next_token"], (sampler(greedy_axis=0),),
     "the greedy ids taken along the batch axis (argmax over dim=0)"),
    (KEY["sample_next_token"], (sampler(cap_k=False),),
     "top_k larger than the vocabulary (k not capped at V)"),
]


CALLS = [  # (key, a wrong function, how its call line must start)
    (KEY["train_step"], (step_fn(zero=False),),
     "call: train_step(model, optimizer, x, y, grad_clip=0.1) 3 times on one batch"),
    (KEY["estimate_loss"], (eval_fn(eval_mode=False),),
     "call: estimate_loss(model, data, batch_size=4, block_size=8, eval_iters=3, generator)"),
]

