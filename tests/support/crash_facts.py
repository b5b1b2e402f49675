"""Facts the crash tests write: distinct enough that evolution keeps each one (no shared attribute,
no near-duplicate wording), so "each fact stored exactly once" is a count."""

from __future__ import annotations

FACTS = (
    "I play the cello on weekends.",
    "I am allergic to peanuts.",
    "I drive a blue Volvo.",
    "I work as a nurse at the city hospital.",
    "I keep bees in my garden.",
    "I run a marathon every spring.",
    "I speak fluent Portuguese.",
    "I have two cats named Miso and Tofu.",
    "I grow tomatoes on my balcony.",
    "I studied physics at university.",
    "I collect vintage postage stamps.",
    "I go rock climbing every Thursday.",
    "I drink green tea every morning.",
    "I was born in Nairobi.",
    "I am learning to fly gliders.",
)
