"""More training material for the injection detector's corpus (corpus.py):
tasks a user asks an assistant, from Self-Instruct's human-written
instructions, to put into documents as injections; and benign documents of
the shapes injections hide in (emails and tool results) whose requests are
addressed by one person to another, written for training, so that the model
learns that a polite request in an email is not by itself an injection.
Training only, as DATASETS.md lists."""

import json


def selfinstruct_tasks(repo):
    """The instructions of Self-Instruct's seed tasks and of its
    user-oriented evaluation set: requests written by people for an
    assistant, on every topic."""
    out = []
    for f in ("data/seed_tasks.jsonl", "human_eval/user_oriented_instructions.jsonl"):
        for line in repo.read(f).splitlines():
            if line.strip():
                out.append(json.loads(line)["instruction"].strip())
    return sorted(set(out))


def llmguard_docs(c, repo):
    """LLM Guard's documentation: text about prompt injection and the
    scanners that look for it (benign, training)."""
    for f in repo.ls("docs"):
        if f.endswith(".md") and f != "docs/changelog.md":
            text = repo.read(f)
            for i in range(0, len(text), 3000):
                c.add("llm-guard-docs", "train", 0, "", "about", text[i:i + 3000])


# People, teams and things for the benign emails below.
NAMES = ["Priya", "Tom", "Marta", "Kenji", "Aisha", "Lukas", "Grace", "Omar", "Sofia", "Daniel", "Ingrid", "Mateo",
         "Chloe", "Ravi", "Hannah", "Yusuf", "Elena", "Sam", "Beatriz", "Noah"]
THINGS = ["the Q3 budget", "the vendor contract", "the onboarding checklist", "the slides for Thursday", "the site survey",
          "the draft press release", "the hiring plan", "the travel claims", "the test results", "the floor plan",
          "the grant application", "the customer feedback summary", "the release notes", "the lease renewal",
          "the safety audit", "the quarterly report", "the invoice from Hartley & Sons", "the meeting minutes"]
DAYS = ["Friday", "Monday morning", "the end of the week", "tomorrow noon", "the 14th", "next Tuesday", "close of business today"]

# Requests from one person to another, as emails carry them.
REQUESTS = [
    "Could you please review {thing} and send me your comments by {day}?",
    "Please find attached {thing}. Let me know if anything needs changing.",
    "Can you forward {thing} to the rest of the team before {day}?",
    "Would you mind printing {thing} for the meeting?",
    "Please send your availability for a call about {thing}.",
    "Could you double-check the numbers in {thing}? I think row 12 is off.",
    "Please delete the old version of {thing} from the shared folder so nobody uses it by mistake.",
    "Can you transfer the remaining items on {thing} to the new tracker?",
    "Please reply to this email to confirm you have received {thing}.",
    "Let me know if you need anything else from me for {thing}.",
    "Could you book the large meeting room for {day} so we can go through {thing}?",
    "Please sign {thing} and return it to me by {day}.",
    "Can you ask finance whether {thing} has been approved?",
    "I'd appreciate it if you could summarise {thing} in a few bullet points for the board.",
    "Please make sure everyone on your team has read {thing} before {day}.",
    "Could you update {thing} with the latest figures and share it with me?",
    "Please don't circulate {thing} outside the department yet.",
    "Would you be able to present {thing} on {day}? Ten minutes is plenty.",
    "Please remember to submit your timesheet along with {thing}.",
    "Can you send me the link to {thing} again? I can't find it in my inbox.",
    "Could you translate {thing} into Spanish for the Madrid office?",
    "Please write a short note to the client explaining the delay with {thing}.",
    "Feel free to call me if you have any questions about {thing}.",
    "Can you check with IT whether the new laptops arrive before {day}?",
    "Please pay the deposit for the venue by {day}; the details are in {thing}.",
]
OPENINGS = ["Hi {to},", "Hello {to},", "Dear {to},", "{to},", "Good morning {to},", "Hey {to},"]
BODIES = [
    "Thanks for your help last week, the workshop went really well.",
    "I hope the move to the new office went smoothly.",
    "Following up on our conversation yesterday about the schedule.",
    "Just a quick note before I leave for the conference.",
    "The client confirmed the dates this morning, so we are on track.",
    "We had a good discussion with the suppliers today and agreed on most points.",
    "As mentioned in the stand-up, the deadline moved by a week.",
    "I spoke to the facilities team and they can fit us in.",
]
CLOSINGS = ["Thanks,\n{frm}", "Best regards,\n{frm}", "Cheers,\n{frm}", "Many thanks,\n{frm}", "Kind regards,\n{frm}", "Thank you!\n{frm}"]


def human_emails(rng, n):
    """n benign emails between colleagues, each with requests to its reader:
    (shape, text) pairs, some rendered as an email API's JSON result."""
    out = []
    for i in range(n):
        to, frm = rng.sample(NAMES, 2)
        reqs = [rng.choice(REQUESTS).format(thing=rng.choice(THINGS), day=rng.choice(DAYS)) for _ in range(rng.randint(1, 3))]
        body = [rng.choice(OPENINGS).format(to=to), "", rng.choice(BODIES)] + reqs + ["", rng.choice(CLOSINGS).format(frm=frm)]
        if rng.random() < 0.5:
            body.insert(3, rng.choice(BODIES))
        subject = "Re: " + rng.choice(THINGS).removeprefix("the ").capitalize()
        text = "\n".join(body)
        if i % 3 == 2:
            item = {"id_": str(100 + i), "sender": f"{frm.lower()}@example.com", "recipients": [f"{to.lower()}@example.com"],
                    "subject": subject, "body": text, "read": rng.random() < 0.5}
            out.append(("tool", json.dumps(item, indent=1)))
        else:
            out.append(("email", f"From: {frm.lower()}@example.com\nTo: {to.lower()}@example.com\nSubject: {subject}\n\n{text}"))
    return out
