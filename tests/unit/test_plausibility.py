"""plausibility: real text (any Latin, Greek or Cyrillic language, numbers, headings) scores high; earlier-OCR layers and garbage lines low."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.processors.ocr.plausibility import plausibility, token_score

# What a page may really hold: prose in several languages, tables of figures, headings, lists, references.
GOOD = [
    "The Mahomedan faith spread along the trade routes of the Indian Ocean.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "The committee met on Monday to review the annual budget and the schedule of delivery.",
    "Payments are due in thirty days from the invoice date unless the contract says otherwise.",
    "Invoice 2024-117 for the quarterly delivery",
    "Total due: 1,482 EUR, payable within 30 days",
    "Please quote the order number on every payment.",
    "Le comité s'est réuni lundi pour examiner le budget de l'année prochaine.",
    "Il n'y a pas de quoi, répondit-elle en souriant à l'enfant.",
    "Die Geschichtsschreibung des Mittelalters beruht auf wenigen Quellen.",
    "Der Angstschweiß stand ihm auf der Stirn, als er das Zimmer betrat.",
    "La reunión se celebró en Madrid el 12 de marzo de 1998.",
    "O relatório anual foi aprovado pela direção em março.",
    "Het verslag werd op dinsdag door de raad goedgekeurd.",
    "Sprawozdanie zostało przyjęte przez radę w poniedziałek.",
    "Заседание комитета состоялось в понедельник утром.",
    "\u0397 συνεδρίαση της επιτροπής έγινε τη Δευτέρα.",
    "12.5   13.2   1,200   -4.1   45%   0.03",
    "2019 2020 2021 2022 2023",
    "Q1 2024   $1,250.00   $980.50   +27.5%",
    "Revenue 4,512 3,980 3,120",
    "10:30  Opening remarks",
    "Table 3. Results by region (n = 412)",
    "Chapter IV",
    "INTRODUCTION",
    "1.2 Related work",
    "Figure 7: The mean error per page, 150 to 300 dpi.",
    "See https://example.org/report or write to office@example.org.",
    "J. R. R. Tolkien, The Hobbit (London: Allen & Unwin, 1937), p. 42.",
    "a) the applicant; b) the respondent; c) the court.",
    "ISO 9001 and COVID-19 measures, A4 paper, MP3 files",
    "— 14 —",
    "NOTES AND QUERIES",
    "Smith, J. (2003). On the origin of things. Nature, 421, 12-15.",
    "Received 3 March 2021; accepted 17 June 2021",
    "McDonald and iPhone sales rose in the 3rd quarter; a PhD from YouTube?",
    "Strč prst do vody, řekl Jan a zasmál se.",
    "He said: \u201cWe'll see.\u201d",
    "Section 4(b)(ii) applies.",
    "Vol. XII, No. 3",
]

# What an earlier OCR layer of an old book, a misread line or a handwritten page's OCR gives.
BAD = [
    "The i'lfinomedan faith ..LCV WI.GL,41.44-gta*Air.",
    "wiis s s s rs s oas",
    "..LCV WI.GL,41.44-gta*Air.",
    "%3^ irf J~ «»% *>",
    "jjjjjjjj iiiii lllll",
    "ii^ v\\\\\\\\ ^iMi' ~-",
    "cT^LjcX^^ ^yO-o^-C^^",
    "rnrnrnm nnnnn mmmmm",
    "l1l1l1 ll1I 1l1l",
    "•\"^; 4 ^« tt'' a '' ;",
    "t t i i r r e e s s",
    "ßtti8 t\\ xX3 Gl7$ 9g#",
    "'' ''' .. ,, ;; :: ''",
    "^ ^ ^ ~ ~ * * * ' '",
    "Ih3 qu1ck br0wn f0x jum9ed",
    "tnrgh pklstn vrbnd",
    "a a a a a a a",
    "W\\V//W\\\\V//W",
    "=-=-=-=-=-=-=",
    "ii. i ' . • i , ' ii",
    "aIrH wIGl tHeRe aNd",
    "1 l I | ! 1 l I",
    "m m rn m n n u",
    "«i;i»~ lO:;i0 |li",
    "S^ i^ a* ^5 e^y Jr*",
    "4c#%Z @!x9 $$q& z8*r",
    "ftftftft ffffff ftf",
    "the lirst of tiie ihni I ; ' : , ' ; .",
    "xxkq zzpt qwrt bcdf",
    ". . . , , , ' ' ' .",
    "o o o o o o",
    "nrn nrn nrn rnr",
    "%% ## @@ && ** !!",
    "gA7e tH1s w0rd",
    "!i!i!i!i !i!i!",
]

# An old book's OCR that confused letters ("tlie" for "the", "li" for "h") has the shapes of words: it scores below real text, not
# as low as garbage; judging it needs a second reading of the page to compare with.
CONFUSED = [
    "Tlie Rev. -wliicli liaa bccn 1ms .iu Mv ,, tbc",
    'Ulll. ^1 iU." fm*; aad tiie',
    "VOL. II. ;^ P.U-T ?. 1 ^ 5 .3 <",
    "fi-om whicli tlie coiiiitry wa8 ofteu iuvaded",
    "tlxe ofl'ice -wliicli 1ms been vvitli",
]


@pytest.mark.parametrize("text", GOOD)
def test_real_text_reads_as_plausible(text):
    assert plausibility(text) >= 0.8, text


@pytest.mark.parametrize("text", BAD)
def test_garbage_reads_as_implausible(text):
    assert plausibility(text) <= 0.45, text


def test_the_two_kinds_are_apart_with_a_clear_margin():
    assert min(map(plausibility, GOOD)) - max(map(plausibility, BAD)) >= 0.3


@pytest.mark.parametrize("text", CONFUSED)
def test_confused_letters_score_below_real_text(text):
    assert plausibility(text) < 0.8, text


@pytest.mark.parametrize(
    ("token", "low"),
    [
        ("faith", False),
        ("l'homme", False),
        ("well-known", False),
        ("1,482", False),
        ("BBC", False),
        ("41.44-gta*Air", True),
        ("wIGL", True),
    ],
)
def test_token_score(token, low):
    assert (token_score(token) < 0.5) is low


@given(st.text(max_size=80))
def test_the_score_is_between_zero_and_one(text):
    assert 0.0 <= plausibility(text) <= 1.0


words = st.sampled_from(["the", "report", "was", "approved", "by", "council", "on", "Monday", "année", "Straße", "дом", "1,200", "2024"])


@given(st.lists(words, min_size=3, max_size=13, unique=True))
def test_any_sentence_of_real_words_is_plausible(tokens):
    assert plausibility(" ".join(tokens)) >= 0.7


@given(st.lists(words, min_size=4, max_size=13, unique=True), st.integers(min_value=3, max_value=12))
def test_a_run_of_lone_letters_in_a_line_lowers_its_score(tokens, count):
    clean = " ".join(tokens)
    assert plausibility(clean + " " + " ".join("s" * count)) < plausibility(clean)
