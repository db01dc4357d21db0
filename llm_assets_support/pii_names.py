"""A small hand-labelled set of person names and locations in real documents of ../shared/data, to measure how
well a masker finds them (precision, recall, and the characters of names it leaves readable).

60 passages (a paragraph or a window of a few sentences, 200 to 1,500 characters) of real English: the 10 CCNet
documents of text/dolma__cc_en_head-0091.ccnet.jsonl.gz (21 passages), WikiText-2 articles of the test and
validation splits (19), the software manuals of bench/seed003_input.jsonl.gz (9) and academic home pages extracted
from warc/dolma__sample-0000.warc.gz (11): 160 person mentions, 144 locations.
Some passages have several people, some many places or an address, and some have no name at all but plenty of
look-alikes (organisations, products, titles, eponyms): precision is measured on those.

The text is not stored here: `passages()` reads it from ../shared/data at run time, cuts each passage at its
offsets and checks the sha256 prefix recorded with it, so a changed file or extractor fails loudly rather than
shifting the labels. A passage is located by
  - text and JSON Lines files: `line`, the 0-based line of the file (for JSON Lines, the row's "text" field);
  - WARC files: `uri`, the WARC-Target-URI of the response, whose HTML is decoded as UTF-8 (errors replaced) and
    extracted by llm_assets.core.extract.extract_html with trafilatura (the pinned version: another may extract
    differently, and the hash check says so);
then `start`/`end`, character offsets (Python str indices) in that text. Each mention's `start`/`end` are
character offsets in the passage, and `text` is the passage's substring there.

Labelling rules (each passage read by hand; the passage's `note` records the decisions particular to it)

person: every mention of a person's name: a full name, a surname alone, a first name alone, a nickname used as a
  name (Besouro, "Hollywood" for Tim Richmond), a surname naming a family ("the Du family"). The span takes middle
  names and initials, a quoted nickname inside the name (Benjamin Paul " Ben " Amos) and suffixes (Fred L. Drake,
  Jr.); it leaves out titles and honorifics (Prof, Mestre, General, Admiral Sir, Empress, Ambassador) and the
  possessive 's / ’s. Public and historical people count like private ones: the set measures detection, what to
  mask is the masker's policy.
  Fictional characters with personal names (Charles Xavier, James Bond) are labelled as persons, and fictional
  places (Eberron) as locations: a masker cannot tell fiction from fact, and the labels then do not depend on
  knowing which is which.
  Not persons: organisations, awards, laws, schools, airports, theatres, companies, algorithms named after a
  person (Hugh Durham Award, Paul G. Allen School, Ronald Reagan Washington National Airport, Pushkin
  Theatre, Nielsen NetRatings, Merkle tree, Huffman coder); titles of works, series and franchises even when they
  are a name (Robinson Crusoe the board game, Sherlock the series, "the James Bond series"); bands; animals (a cat
  called Belphegor); forum handles (Killtown, card51short); placeholders (Joe Schmoe, NAME OF AUTHOR); epithets
  (the Bard); names inside e-mail addresses and host names (those are the regex masks' business).

location: countries, states, regions, counties, cities, towns, villages, continents, islands, seas, oceans,
  rivers and other landforms, streets, and named buildings and facilities when the text speaks of them as places
  (airports, museums, plazas, markets, a synagogue, a theatre, an air base, a bunker, a club passed on a walk).
  Generic lower-case words around a name are left out (Henan province -> Henan, eastern Atlantic Ocean -> Atlantic
  Ocean). A postal address written as one run (number, street, suite, city, region, postcode, country) is one
  mention; a street address followed by "in <city>" is two. Countries, states and cities are labelled whatever
  the role the text gives them (a government, "the UK and US versions", "an England youth international").
  Not locations: a place name inside the name of an organisation, event, team, newspaper, award or chart
  (University of Washington, Las Vegas Review-Journal, Edinburgh Skating Club, London Paralympics, US Billboard Hot
  100); a bare place name standing for a sports club or a university crew (Molde; Oxford and Cambridge as
  crews); shops, restaurants and businesses, and an institution spoken of as an organisation (a hospital as an
  employer); adjectives, demonyms and languages (Swiss, Chinese, English, Belgian).

WikiText is tokenised (` @-@ ` for hyphens, ` 's`) and replaces rare words with `<unk>`: a name partly replaced
is labelled over its whole written extent, `<unk>` included ("William <unk>", "Miguel López de <unk>"); a bare `<unk>`
is never labelled, even where it stands for a whole name (nothing of the name is left to mask).

Scoring (`score`): a predictor maps a passage's text to spans (start, end, kind), kind "person" or "location".
A predicted span matches a gold mention of the same kind when they overlap by at least one character. Per kind:
recall = gold mentions matched by some prediction / gold mentions; precision = predictions matching some gold
mention / predictions (0 when there are none); F1 their harmonic mean. Overlap, not exact boundaries, because a
mask that covers "Dick Cheney" as "Dick" + "Cheney", or an address as its parts, still hides it; one prediction
over two adjacent names matches both, and two predictions on one name are both correct. "any" scores the same
ignoring kinds (a name masked as the wrong kind is still masked). `unmasked_chars` counts the characters of gold
mentions that no predicted span of any kind covers, out of `gold_chars`: a partial mask ("Caspar" of "Caspar
Badrutt") matches the mention but leaves characters readable.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from llm_assets_support.shared_data import SHARED_DATA

if TYPE_CHECKING:
    from llm_assets.core.filters.pii import PIIMasker

Kind = Literal["person", "location"]
KINDS: tuple[Kind, ...] = ("person", "location")

CCNET = "text/dolma__cc_en_head-0091.ccnet.jsonl.gz"
WIKI_TEST = "text/pytorch-examples__wikitext-2-v1.test.txt"
WIKI_VALID = "text/pytorch-examples__wikitext-2-v1.valid.txt"
MANUALS = "bench/seed003_input.jsonl.gz"
HOMEPAGES = "warc/dolma__sample-0000.warc.gz"


@dataclass(frozen=True)
class Mention:
    text: str
    start: int  # character offsets in the passage
    end: int
    kind: Kind


@dataclass(frozen=True)
class Passage:
    id: str
    file: str  # relative to ../shared/data
    start: int  # character offsets of the passage in its source text (a line, a row's "text", an extracted page)
    end: int
    sha256: str  # prefix of the sha256 of the passage's UTF-8 text
    mentions: tuple[Mention, ...]
    line: int | None = None  # text and JSON Lines files: 0-based line
    uri: str | None = None  # WARC files: WARC-Target-URI of the response
    note: str = ""  # the labelling decisions particular to this passage


def M(text: str, start: int, end: int, kind: Kind) -> Mention:  # short, for the table below
    return Mention(text, start, end, kind)


PASSAGES: tuple[Passage, ...] = (
    # --- CCNet documents -------------------------------------------------------------------------------------
    Passage("ccnet-factoring", CCNET, line=0, start=0, end=435, sha256="eaf42de838a5b59f",
            note="no names: a business announcement",
            mentions=()),
    Passage("ccnet-headmaster", CCNET, line=1, start=0, end=513, sha256="d3700d2f7926ee6d",
            note="a name after a title (ambassador): the title is left out",
            mentions=(
                M("Segun Olusola", 139, 152, "person"),
            )),
    Passage("ccnet-ruby-spa", CCNET, line=2, start=0, end=691, sha256="334b964158aa835b",
            note="no names: Japanese and African are adjectives, Ruby is a language",
            mentions=()),
    Passage("ccnet-pentagon-comments", CCNET, line=3, start=381, end=838, sha256="db6ba80010287bf9",
            note="forum handles (Killtown, DHS, card51short) are not names",
            mentions=(
                M("John Judge", 299, 309, "person"),
            )),
    Passage("ccnet-pentagon-mineta", CCNET, line=3, start=1170, end=2398, sha256="d484d4fdfb9248c3",
            note=("Joe Schmoe is a placeholder for anybody, not labelled; the Vanity Fair piece and 9/11 "
                  "Commission are not places"),
            mentions=(
                M("America", 103, 110, "location"),
                M("Washington D.C.", 195, 210, "location"),
                M("D.C.", 354, 358, "location"),
                M("Norman Mineta", 464, 477, "person"),
                M("Presidential Emergency Operations Center", 511, 551, "location"),
                M("Dick Cheney", 565, 576, "person"),
                M("Cheney", 665, 671, "person"),
                M("Dick Cheney", 1022, 1033, "person"),
                M("Dick Cheney", 1119, 1130, "person"),
                M("PEOC", 1146, 1150, "location"),
                M("Norman Mineta", 1202, 1215, "person"),
            )),
    Passage("ccnet-pentagon-renee-may", CCNET, line=3, start=5489, end=5980, sha256="78842463793e274b",
            note=("newspapers named after cities (Las Vegas Review-Journal, San Francisco Chronicle) are "
                  "organisations"),
            mentions=(
                M("Renee May", 0, 9, "person"),
                M("Las Vegas", 84, 93, "location"),
                M("Nancy May", 323, 332, "person"),
            )),
    Passage("ccnet-pentagon-fbi", CCNET, line=3, start=6139, end=6931, sha256="3da8fdf1f955dadd",
            note=("airports are places even when named after a person; FBI Washington Field Office is an "
                  "organisation; the name split by an editorial bracket is one mention"),
            mentions=(
                M("Pentagon", 84, 92, "location"),
                M("Washington Dulles International Airport", 288, 327, "location"),
                M("Arthur] Eberhart", 354, 370, "person"),
                M("Dulles", 423, 429, "location"),
                M("Ronald Reagan Washington National Airport", 520, 561, "location"),
                M("Jim Rice", 646, 654, "person"),
                M("Pentagon", 686, 694, "location"),
            )),
    Passage("ccnet-xavier-fanlisting", CCNET, line=4, start=0, end=526, sha256="3bcc82726f969108",
            note=("a fictional character is labelled like a person; X-Men and The Fanlistings Network are not "
                  "names"),
            mentions=(
                M("Charles Xavier", 18, 32, "person"),
                M("Charles Xavier", 158, 172, "person"),
                M("Charles Xavier", 240, 254, "person"),
                M("LINDSAY", 518, 525, "person"),
            )),
    Passage("ccnet-city-dogs", CCNET, line=5, start=148, end=1261, sha256="fa758d43976775d3",
            note="no people; City Dogs Rescue, 9pm Studios and Washington City Paper are organisations",
            mentions=(
                M("DC", 130, 132, "location"),
                M("Virginia", 174, 182, "location"),
                M("Washington, D.C.", 723, 739, "location"),
            )),
    Passage("ccnet-ice-st-moritz", CCNET, line=6, start=592, end=1127, sha256="67bae444f8870dd0",
            note="Swiss and English are adjectives",
            mentions=(
                M("St. Moritz", 25, 35, "location"),
                M("Caspar Badrutt", 46, 60, "person"),
                M("Badrutt", 122, 129, "person"),
                M("St. Moritz", 199, 209, "location"),
                M("Badrutt", 403, 410, "person"),
                M("Badrutt", 474, 481, "person"),
            )),
    Passage("ccnet-ice-curling", CCNET, line=6, start=2911, end=3376, sha256="5433468b144e501c",
            note="the World Curling Federation is an organisation",
            mentions=(
                M("Scotland", 33, 41, "location"),
                M("Scotland", 106, 114, "location"),
                M("Dunblane", 237, 245, "location"),
                M("Henry Adamson", 392, 405, "person"),
            )),
    Passage("ccnet-ice-skating", CCNET, line=6, start=4692, end=5659, sha256="978247283570058f",
            note="the Edinburgh Skating Club is an organisation (its city is not labelled inside the name)",
            mentions=(
                M("Robert Jones", 225, 237, "person"),
                M("Jackson Haines", 552, 566, "person"),
                M("Haines", 928, 934, "person"),
                M("Europe", 960, 966, "location"),
            )),
    Passage("ccnet-ice-vienna", CCNET, line=6, start=5660, end=6236, sha256="ace5e31815740758",
            note="Vienna School and International Skating Union are organisations",
            mentions=(
                M("Vienna", 0, 6, "location"),
                M("Haines", 161, 167, "person"),
                M("Netherlands", 359, 370, "location"),
                M("Lausanne", 374, 382, "location"),
                M("Switzerland", 384, 395, "location"),
            )),
    Passage("ccnet-capoeira-colony", CCNET, line=7, start=750, end=1906, sha256="da6bf11050e81357",
            note="no people; Portuguese and Tupi are peoples",
            mentions=(
                M("Africa", 92, 98, "location"),
                M("Brazil", 181, 187, "location"),
                M("Africa", 269, 275, "location"),
                M("India", 280, 285, "location"),
                M("Brazil", 339, 345, "location"),
                M("Brazil", 413, 419, "location"),
                M("Brazil", 456, 462, "location"),
                M("Africa", 790, 796, "location"),
                M("Brazil", 913, 919, "location"),
                M("Brazil", 993, 999, "location"),
                M("Sudan", 1030, 1035, "location"),
                M("Guinea", 1037, 1043, "location"),
                M("Angola", 1048, 1054, "location"),
                M("Congo", 1131, 1136, "location"),
                M("Mozambique", 1141, 1151, "location"),
            )),
    Passage("ccnet-capoeira-legends", CCNET, line=7, start=6156, end=7156, sha256="07a8e3f2083257ac",
            note=("nicknames of real people are names; the title Mestre is left out; Corpo Fechado is not a "
                  "name"),
            mentions=(
                M("Besouro", 34, 41, "person"),
                M("Nascimento Grande", 121, 138, "person"),
                M("Vicente", 307, 314, "person"),
                M("Benedito", 353, 361, "person"),
                M("Manuel Dos Reis Machado", 395, 418, "person"),
                M("Pastinha", 572, 580, "person"),
                M("Bimba", 590, 595, "person"),
            )),
    Passage("ccnet-capoeira-bimba-bahia", CCNET, line=7, start=8387, end=9042, sha256="bad0d317da7c17f2",
            note="the Governor of Bahia is a title: Bahia is labelled, the governor's name too",
            mentions=(
                M("Brasil", 164, 170, "location"),
                M("Salvador", 187, 195, "location"),
                M("Bahia", 197, 202, "location"),
                M("Bimba", 211, 216, "person"),
                M("Bimba", 334, 339, "person"),
                M("Bahia", 414, 419, "location"),
                M("Juracy Magalhães", 421, 437, "person"),
            )),
    Passage("ccnet-capoeira-spread", CCNET, line=7, start=9580, end=10681, sha256="d68b71cd5e020516",
            note="Capoeira Angola and Capoeira Regional are styles, not places",
            mentions=(
                M("Rio de Janeiro", 48, 62, "location"),
                M("Sao Paulo", 74, 83, "location"),
                M("Bimba", 133, 138, "person"),
                M("Salvador", 142, 150, "location"),
                M("Bahia", 152, 157, "location"),
                M("North America", 206, 219, "location"),
                M("Europe", 221, 227, "location"),
                M("Africa", 229, 235, "location"),
                M("Asia", 237, 241, "location"),
                M("Australasia", 246, 257, "location"),
                M("Pastinha", 428, 436, "person"),
                M("Nestor Capoeira", 548, 563, "person"),
                M("Bimba", 987, 992, "person"),
                M("Pastinha", 1023, 1031, "person"),
                M("Arraia", 1094, 1100, "person"),
            )),
    Passage("ccnet-stanley-walk", CCNET, line=8, start=0, end=649, sha256="52a31874aa3e24bb",
            note="named buildings are places; Chinese New Year is a holiday",
            mentions=(
                M("Hong Kong Island", 52, 68, "location"),
                M("Stanley", 122, 129, "location"),
                M("Stanley Plaza", 172, 185, "location"),
                M("Maritime Museum", 633, 648, "location"),
            )),
    Passage("ccnet-stanley-market", CCNET, line=8, start=815, end=1617, sha256="993ae0c5d483c417",
            note="the club is a landmark on the walk, so a place",
            mentions=(
                M("Stanley", 53, 60, "location"),
                M("Fishermen's Recreation Club", 425, 452, "location"),
                M("Stanley Market Road", 637, 656, "location"),
                M("Stanley Market", 768, 782, "location"),
            )),
    Passage("ccnet-shakespeare-legacy", CCNET, line=9, start=0, end=705, sha256="d899cc1e854f0a9c",
            note="Measure for Measure is a title; English is a language",
            mentions=(
                M("Shakespeare", 0, 11, "person"),
                M("United States", 76, 89, "location"),
                M("Shakespeare", 96, 107, "person"),
                M("Shakespeare", 180, 191, "person"),
                M("Shakespeare", 407, 418, "person"),
                M("Shakespeare", 552, 563, "person"),
                M("Shakespeare", 660, 671, "person"),
            )),
    Passage("ccnet-shakespeare-moscow", CCNET, line=9, start=1650, end=2292, sha256="943fe6978a49a475",
            note=("the Bard is an epithet, not labelled; Pushkin Theatre and Cheek by Jowl are companies; the "
                  "theatre they play at is a place"),
            mentions=(
                M("Shakespeare", 34, 45, "person"),
                M("Shakespeare", 132, 143, "person"),
                M("Shakespeare", 472, 483, "person"),
                M("Emerson Cutler Majestic", 602, 625, "location"),
            )),
    # --- WikiText-2 articles ---------------------------------------------------------------------------------
    Passage("wikitext-du-fu-criticism", WIKI_TEST, line=39, start=1, end=1023, sha256="6b73ff854d1c93b0",
            note="a name partly replaced by <unk> is labelled over its whole written extent",
            mentions=(
                M("Burton Watson", 117, 130, "person"),
                M("Du Fu", 246, 251, "person"),
                M("William <unk>", 387, 400, "person"),
                M("Stephen Owen", 814, 826, "person"),
                M("Du Fu", 865, 870, "person"),
            )),
    Passage("wikitext-du-fu-early-years", WIKI_TEST, line=43, start=1, end=436, sha256="71113ce882c3a94d",
            note=("titles (Empress) and generic words (province, county) are left out; a family name naming a "
                  "family is a person's name"),
            mentions=(
                M("Du Fu", 25, 30, "person"),
                M("Du <unk>", 91, 99, "person"),
                M("Wu", 158, 160, "person"),
                M("Du Fu", 163, 168, "person"),
                M("Luoyang", 247, 254, "location"),
                M("Henan", 257, 262, "location"),
                M("Gong", 274, 278, "location"),
                M("Chang 'an", 386, 395, "location"),
                M("Du", 424, 426, "person"),
            )),
    Passage("wikitext-ben-amos", WIKI_TEST, line=1011, start=1, end=500, sha256="293a192e099c4985",
            note=("football clubs (Crewe Alexandra, Manchester United, Molde, Bolton Wanderers) are "
                  "organisations even when named after a town"),
            mentions=(
                M("Benjamin Paul \" Ben \" Amos", 0, 26, "person"),
                M("Macclesfield", 145, 157, "location"),
                M("Cheshire", 160, 168, "location"),
                M("Amos", 171, 175, "person"),
                M("Amos", 377, 381, "person"),
                M("England", 388, 395, "location"),
            )),
    Passage("wikitext-brad-stevens", WIKI_TEST, line=2446, start=1, end=718, sha256="c48da8d08d06c0c1",
            note=("awards named after people (Hugh Durham Award, Jim <unk> Award) are not person mentions; "
                  "Butler is the university team"),
            mentions=(
                M("Stevens", 0, 7, "person"),
                M("Stevens", 321, 328, "person"),
                M("Stevens", 366, 373, "person"),
                M("Stevens", 607, 614, "person"),
                M("John Wooden", 664, 675, "person"),
            )),
    Passage("wikitext-manila", WIKI_TEST, line=2993, start=1, end=445, sha256="006d2fceffd15824",
            note="Spanish is an adjective",
            mentions=(
                M("Manila", 0, 6, "location"),
                M("Philippines", 48, 59, "location"),
                M("Miguel López de <unk>", 106, 127, "person"),
                M("Philippines", 240, 251, "location"),
                M("Manila Bay", 293, 303, "location"),
                M("<unk> City of <unk>", 423, 442, "location"),
            )),
    Passage("wikitext-hannah-dodd", WIKI_TEST, line=3867, start=1, end=443, sha256="4233152b238c8921",
            note=("places inside the names of events and teams (London Paralympics, Sydney University Flames, "
                  "Osaka Friendship Games) are not labelled"),
            mentions=(
                M("Dodd", 31, 35, "person"),
                M("Osaka", 256, 261, "location"),
                M("Beijing", 403, 410, "location"),
            )),
    Passage("wikitext-temple-beth-israel", WIKI_TEST, line=3668, start=1, end=243, sha256="875c7a52b2304d98",
            note="a synagogue is a building, so a place; a street address is one mention",
            mentions=(
                M("Temple Beth Israel", 0, 18, "location"),
                M("1175 East 29th Avenue", 76, 97, "location"),
                M("Eugene", 101, 107, "location"),
                M("Oregon", 110, 116, "location"),
                M("Beth Israel", 179, 190, "location"),
                M("Eugene", 234, 240, "location"),
            )),
    Passage("wikitext-beth-israel-streets", WIKI_TEST, line=3669, start=1, end=208, sha256="cca56640fe4c0922",
            note="streets without numbers",
            mentions=(
                M("West Eighth Street", 62, 80, "location"),
                M("Portland Street", 120, 135, "location"),
            )),
    Passage("wikitext-eastern-exit-bishop", WIKI_TEST, line=1327, start=1, end=744, sha256="926bbed372139f94",
            note=("Ambassador is a title; US in \"US embassies\" is the country, the US Embassy in Beirut a "
                  "building; the State Department is an organisation"),
            mentions=(
                M("James K. Bishop", 130, 145, "person"),
                M("United States", 167, 180, "location"),
                M("Somalia", 197, 204, "location"),
                M("Bishop", 218, 224, "person"),
                M("US", 276, 278, "location"),
                M("US Embassy", 315, 325, "location"),
                M("Beirut", 329, 335, "location"),
                M("Lebanon", 338, 345, "location"),
                M("Bishop", 436, 442, "person"),
                M("Africa", 551, 557, "location"),
                M("Bishop", 575, 581, "person"),
            )),
    Passage("wikitext-constant-k-campbell", WIKI_TEST, line=2099, start=1, end=498, sha256="89dc7bd5a1cb8c35",
            note="AT & T Co is a company",
            mentions=(
                M("George Campbell", 34, 49, "person"),
                M("Otto <unk>", 170, 180, "person"),
                M("Campbell", 244, 252, "person"),
                M("Campbell", 351, 359, "person"),
            )),
    Passage("wikitext-kiss-you-charts", WIKI_TEST, line=119, start=1, end=663, sha256="f20df59365e92d40",
            note=("no people: One Direction is a band; US Billboard Hot 100 is a chart; Belgian is an "
                  "adjective"),
            mentions=(
                M("Ireland", 55, 62, "location"),
                M("United Kingdom", 71, 85, "location"),
                M("Flanders", 158, 166, "location"),
                M("Wallonia", 171, 179, "location"),
                M("Australia", 198, 207, "location"),
                M("Canada", 210, 216, "location"),
                M("Denmark", 219, 226, "location"),
                M("France", 229, 235, "location"),
                M("New Zealand", 238, 249, "location"),
                M("Netherlands", 260, 271, "location"),
                M("UK", 506, 508, "location"),
                M("US", 513, 515, "location"),
            )),
    Passage("wikitext-die-another-day", WIKI_VALID, line=3638, start=1, end=619, sha256="d14820f8369a47db",
            note=("a fictional character is labelled like a person; \"the James Bond series\" is a title, not a "
                  "mention; MI6 is an organisation"),
            mentions=(
                M("Pierce <unk>", 116, 128, "person"),
                M("James Bond", 156, 166, "person"),
                M("Bond", 186, 190, "person"),
                M("North Korea", 216, 227, "location"),
                M("Bond", 372, 376, "person"),
            )),
    Passage("wikitext-meridian", WIKI_VALID, line=134, start=1, end=458, sha256="42587e55ea09a3d1",
            note="a statistical area is a region",
            mentions=(
                M("Meridian", 0, 8, "location"),
                M("Mississippi", 51, 62, "location"),
                M("United States", 72, 85, "location"),
                M("Lauderdale County", 113, 130, "location"),
                M("Meridian , Mississippi <unk> Statistical Area", 161, 206, "location"),
                M("Jackson", 269, 276, "location"),
                M("Mississippi", 279, 290, "location"),
                M("Birmingham", 321, 331, "location"),
                M("Alabama", 334, 341, "location"),
                M("New Orleans", 375, 386, "location"),
                M("Louisiana", 389, 398, "location"),
                M("Memphis", 436, 443, "location"),
                M("Tennessee", 446, 455, "location"),
            )),
    Passage("wikitext-meridian-key-field", WIKI_VALID, line=137, start=1, end=650, sha256="d314951b33a0d478",
            note=("a hospital spoken of as an employer is an organisation; the Air National Guard is an "
                  "organisation"),
            mentions=(
                M("Naval Air Station Meridian", 48, 74, "location"),
                M("Key Field", 79, 88, "location"),
                M("<unk> Meridian", 127, 141, "location"),
                M("Key Field", 278, 287, "location"),
                M("Fred", 312, 316, "person"),
                M("Al Key", 321, 327, "person"),
            )),
    Passage("wikitext-tim-richmond", WIKI_VALID, line=699, start=1, end=644, sha256="3ddc2b0146bec6d5",
            note=("a nickname of a person is a name; Charlotte Motor <unk> is an organisation; Days of "
                  "Thunder is a title"),
            mentions=(
                M("Richmond", 0, 8, "person"),
                M("Hollywood", 94, 103, "person"),
                M("Richmond", 122, 130, "person"),
                M("<unk> Wheeler", 188, 201, "person"),
                M("Tim", 247, 250, "person"),
                M("James Dean", 289, 299, "person"),
                M("Richmond", 328, 336, "person"),
                M("Hal <unk>", 463, 472, "person"),
                M("Cole <unk>", 475, 485, "person"),
                M("Tom Cruise", 548, 558, "person"),
                M("Richmond", 582, 590, "person"),
                M("Harry Hyde", 616, 626, "person"),
                M("Rick <unk>", 631, 641, "person"),
            )),
    Passage("wikitext-ward-churchill", WIKI_VALID, line=2980, start=1, end=317, sha256="40a8d7c2b91b81c0",
            mentions=(
                M("Churchill", 31, 40, "person"),
                M("Colorado", 116, 124, "location"),
                M("Atlanta", 154, 161, "location"),
                M("Georgia", 164, 171, "location"),
                M("Churchill", 182, 191, "person"),
            )),
    Passage("wikitext-sullivans-island", WIKI_VALID, line=2021, start=1, end=705, sha256="2acfd294f65ea559",
            note="General, Admiral Sir and Colonel are titles; a place named after a person is a place",
            mentions=(
                M("North America", 104, 117, "location"),
                M("North Carolina", 203, 217, "location"),
                M("Henry Clinton", 293, 306, "person"),
                M("Peter Parker", 323, 335, "person"),
                M("Charleston", 367, 377, "location"),
                M("Long Island", 433, 444, "location"),
                M("Sullivan 's Island", 452, 470, "location"),
                M("William <unk>", 485, 498, "person"),
                M("Charles Lee", 606, 617, "person"),
            )),
    Passage("wikitext-boat-race", WIKI_VALID, line=3147, start=1, end=736, sha256="535d4fec86d528af",
            note=("no people; the universities and their crews (Oxford, Cambridge) are organisations; the "
                  "Championship Course is a stretch of the river"),
            mentions=(
                M("Championship Course", 304, 323, "location"),
                M("River Thames", 331, 343, "location"),
                M("London", 357, 363, "location"),
                M("United Kingdom", 462, 476, "location"),
            )),
    Passage("wikitext-european-lobster", WIKI_VALID, line=3, start=1, end=694, sha256="274076a1dd79889d",
            note="no people: species names",
            mentions=(
                M("Atlantic Ocean", 116, 130, "location"),
                M("Mediterranean Sea", 133, 150, "location"),
                M("Black Sea", 168, 177, "location"),
                M("British Isles", 678, 691, "location"),
            )),
    # --- software manuals (the seed paper's workload) --------------------------------------------------------
    Passage("manual-bzip2-author", MANUALS, line=175, start=0, end=849, sha256="93e9c2b3f36f35db",
            note="the Huffman coder is named after a person, not a mention of him",
            mentions=(
                M("Michael Burrows", 263, 278, "person"),
                M("David Wheeler", 283, 296, "person"),
                M("David Wheeler", 337, 350, "person"),
                M("Peter Fenwick", 383, 396, "person"),
                M("Alistair Moffat", 481, 496, "person"),
                M("Radford Neal", 498, 510, "person"),
                M("Ian Witten", 515, 525, "person"),
                M("Christian von Roques", 716, 736, "person"),
                M("Bela Lubkin", 821, 832, "person"),
            )),
    Passage("manual-python-codecs", MANUALS, line=5377, start=0, end=1084, sha256="27bfdb38cae2bdf1",
            note="an e-mail address is not a name mention (the regex masks handle it)",
            mentions=(
                M("Marc-Andre Lemburg", 554, 572, "person"),
                M("Lance Ellinghouse", 650, 667, "person"),
                M("Jack Jansen", 684, 695, "person"),
                M("Fredrik Lundh", 700, 713, "person"),
            )),
    Passage("manual-apropos-authors", MANUALS, line=6836, start=0, end=861, sha256="f3b3b199ec97ce9f",
            note="a short name alone (Wilf.) is a name",
            mentions=(
                M("Wilf", 454, 458, "person"),
                M("Fabrizio Polacco", 489, 505, "person"),
                M("Colin Watson", 529, 541, "person"),
            )),
    Passage("manual-chattr-author", MANUALS, line=7647, start=0, end=1212, sha256="2afbfe9191c2a2f0",
            note="a Merkle tree is named after a person, not a mention of him; Linux is software",
            mentions=(
                M("Remy Card", 833, 842, "person"),
                M("Theodore Ts'o", 902, 915, "person"),
            )),
    Passage("manual-patch-authors", MANUALS, line=14606, start=0, end=1418, sha256="e400782ad0d414ed",
            mentions=(
                M("Larry Wall", 816, 826, "person"),
                M("Paul Eggert", 864, 875, "person"),
                M("Wayne Davison", 1046, 1059, "person"),
                M("David MacKenzie", 1092, 1107, "person"),
                M("Andreas Grünbacher", 1153, 1171, "person"),
                M("Paul Eggert", 1343, 1354, "person"),
                M("David MacKenzie", 1356, 1371, "person"),
                M("Jim Meyering", 1377, 1389, "person"),
            )),
    Passage("manual-gpl-address", MANUALS, line=3551, start=0, end=1367, sha256="922a6ef6703bbf95",
            note="a postal address is one mention; NAME OF AUTHOR is a placeholder, Gnomovision a program",
            mentions=(
                M("59 Temple Place, Suite 330, Boston, MA 02111-1307, USA", 164, 218, "location"),
            )),
    Passage("manual-gettext-nls-tutorial", MANUALS, line=2679, start=0, end=884, sha256="4519d3b8adb9be56",
            note="names inside e-mail addresses and host names are not mentions",
            mentions=(
                M("Patrick D’Cruze", 367, 382, "person"),
                M("Jochen Hein", 442, 453, "person"),
            )),
    Passage("manual-distutils-drake", MANUALS, line=5205, start=0, end=1098, sha256="746f87e86dceabb6",
            note="a suffix (Jr.) belongs to the name; Unix and Python are software",
            mentions=(
                M("Fred L. Drake, Jr.", 156, 174, "person"),
            )),
    Passage("manual-cmake-buildsystem", MANUALS, line=7688, start=0, end=847, sha256="99573feba2eb9462",
            note="no names: CMake, CMakeLists.txt and CMakeCache.txt are software and files",
            mentions=()),
    # --- academic home pages (WARC) --------------------------------------------------------------------------
    Passage("warc-weld-faculty-page", HOMEPAGES, uri="https://www.cs.washington.edu/people/faculty/weld",
            start=0, end=1004, sha256="46f7247c50ceb11c",
            note=("companies named after people (Nielsen NetRatings) and the Allen Institute are "
                  "organisations; Griffith University too"),
            mentions=(
                M("Dan", 0, 3, "person"),
                M("Dan", 329, 332, "person"),
                M("Dan", 503, 506, "person"),
                M("Dan", 785, 788, "person"),
                M("Dan", 880, 883, "person"),
                M("Brisbane", 935, 943, "location"),
                M("Australia", 945, 954, "location"),
            )),
    Passage("warc-soldaini-about", HOMEPAGES, uri="https://soldaini.net/",
            start=0, end=711, sha256="27a1613e38a92f89",
            note="Amazon Alexa, Georgetown University, Queer In AI and OLMo are organisations or products",
            mentions=(
                M("Luca Soldaini", 29, 42, "person"),
                M("Nazli Goharian", 499, 513, "person"),
            )),
    Passage("warc-soldaini-projects", HOMEPAGES, uri="https://soldaini.net/",
            start=1413, end=1970, sha256="b0804edf3a1d772f",
            note="AboutMe and WIMBD are projects",
            mentions=(
                M("Lucy Li", 49, 56, "person"),
                M("Yanai Elazar", 173, 185, "person"),
                M("Orion Weller", 359, 371, "person"),
                M("Sean MacAvaney", 477, 491, "person"),
            )),
    Passage("warc-kyleclo-hobbies", HOMEPAGES, uri="https://kyleclo.com/",
            start=212, end=601, sha256="ab996634d0edbad5",
            note=("a cat (Belphegor) is not a person; Robinson Crusoe is the name of a board game here; "
                  "Eberron is a fictional world, labelled like a real place; tea shops are businesses"),
            mentions=(
                M("Seattle", 10, 17, "location"),
                M("Eberron", 281, 288, "location"),
                M("Seattle", 332, 339, "location"),
            )),
    Passage("warc-kyleclo-news", HOMEPAGES, uri="https://kyleclo.com/",
            start=1064, end=1605, sha256="4f7557df79b6d313",
            note="PaperMage is a toolkit, EMNLP a conference",
            mentions=(
                M("Singapore", 390, 399, "location"),
                M("Orion Weller", 486, 498, "person"),
                M("Hyunji Lee", 500, 510, "person"),
                M("Fangyuan Xu", 512, 523, "person"),
                M("Hang Jiang", 528, 538, "person"),
            )),
    Passage("warc-talaugust-bio", HOMEPAGES, uri="https://talaugust.github.io/",
            start=0, end=790, sha256="508bb27610895778",
            note=("no places: the universities (Illinois at Urbana-Champaign, Washington) and the Paul G. "
                  "Allen School are organisations"),
            mentions=(
                M("Katharina Reinecke", 338, 356, "person"),
                M("Noah Smith", 361, 371, "person"),
            )),
    Passage("warc-bragg-bio", HOMEPAGES, uri="https://www.jonathanbragg.com/",
            start=0, end=721, sha256="9e0523dc4cc68be4",
            note="no names: Stanford, Harvard College and New England Conservatory are schools",
            mentions=()),
    Passage("warc-hope-awards", HOMEPAGES, uri="https://tomhoper.github.io/",
            start=672, end=1398, sha256="6215296fd122f191",
            note=("the Azrieli fellowship is named after a person; the Heidelberg Laureate Forum is an event; "
                  "Nature and Science are journals"),
            mentions=(
                M("Daniel Weld", 267, 278, "person"),
                M("Eric Horvitz", 283, 295, "person"),
                M("Dafna Shahaf", 328, 340, "person"),
            )),
    Passage("warc-naik-advisors", HOMEPAGES, uri="https://www.cs.cmu.edu/~anaik/",
            start=0, end=814, sha256="61167ea4dd0f9950",
            note="Prof is a title; Carnegie Mellon University is an organisation",
            mentions=(
                M("Carolyn Rose", 653, 665, "person"),
                M("Ed Hovy", 709, 716, "person"),
                M("Graham Neubig", 723, 736, "person"),
                M("Eric Nyberg", 743, 754, "person"),
                M("Alan Black", 761, 771, "person"),
                M("James Antaki", 781, 793, "person"),
            )),
    Passage("warc-naik-free-time", HOMEPAGES, uri="https://www.cs.cmu.edu/~anaik/",
            start=1358, end=2088, sha256="32ad1e942de604fb",
            note="Sherlock and Game of Thrones are titles of series; British is an adjective",
            mentions=(
                M("Aaron Mahnke", 660, 672, "person"),
            )),
    Passage("warc-zhang-news", HOMEPAGES, uri="https://homes.cs.washington.edu/~axz/",
            start=445, end=965, sha256="f4fb91bb63c89943",
            note=("the George Sprowls Award and the Belfer Fellow are named after people; MIT, Stanford CS, "
                  "ADL and BBC are organisations"),
            mentions=(
                M("Michael Bernstein", 274, 291, "person"),
            )),
)


class PassageChanged(ValueError):
    """A passage's text no longer hashes to the recorded prefix: its file (or the extractor) changed."""


@cache
def _lines(file: str) -> tuple[str, ...]:
    path = SHARED_DATA / file
    raw = gzip.decompress(path.read_bytes()) if file.endswith(".gz") else path.read_bytes()
    return tuple(raw.decode("utf-8").split("\n"))


@cache
def _warc_pages(file: str) -> dict[str, str]:
    """Extracted text of each HTML response of a WARC file, by target URI."""
    from warcio.archiveiterator import ArchiveIterator

    from llm_assets.core.extract import extract_html

    pages: dict[str, str] = {}
    with open(SHARED_DATA / file, "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type != "response":
                continue
            uri = record.rec_headers.get_header("WARC-Target-URI")
            extracted = extract_html(record.content_stream().read().decode("utf-8", errors="replace"), uri,
                                     extractor="trafilatura")
            if extracted is not None:
                pages[uri] = extracted.text
    return pages


def source_text(passage: Passage) -> str:
    """The whole text the passage is cut from: a line, a JSON row's "text", or an extracted page."""
    if passage.uri is not None:
        return _warc_pages(passage.file)[passage.uri]
    assert passage.line is not None, passage.id
    line = _lines(passage.file)[passage.line]
    return json.loads(line)["text"] if ".jsonl" in passage.file else line


def passage_text(passage: Passage) -> str:
    text = source_text(passage)[passage.start:passage.end]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if not digest.startswith(passage.sha256):
        raise PassageChanged(f"{passage.id}: {passage.file} [{passage.start}:{passage.end}] hashes to {digest[:16]}, "
                             f"not {passage.sha256}: the file or the extraction changed, the labels no longer apply")
    return text


def passages() -> list[tuple[Passage, str]]:
    """Every passage with its text, read from ../shared/data (FileNotFoundError where that folder is absent)."""
    return [(p, passage_text(p)) for p in PASSAGES]


# --- scoring -----------------------------------------------------------------------------------------------------

Span = tuple[int, int, str]  # (start, end, kind) in the passage's text


@dataclass(frozen=True)
class KindScores:
    gold: int  # gold mentions
    predicted: int  # predicted spans
    found: int  # gold mentions overlapped by a prediction of the same kind
    correct: int  # predictions overlapping a gold mention of the same kind
    gold_chars: int  # characters of the gold mentions
    unmasked_chars: int  # of those, characters no predicted span (of any kind) covers

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class Scores:
    person: KindScores
    location: KindScores
    any: KindScores  # kinds ignored: a name masked as the wrong kind is still masked
    misses: tuple[tuple[str, Mention], ...]  # (passage id, gold mention) no prediction of its kind overlaps
    false_positives: tuple[tuple[str, int, int, str, str], ...]  # (passage id, start, end, kind, text)

    def __getitem__(self, kind: str) -> KindScores:
        return {"person": self.person, "location": self.location, "any": self.any}[kind]

    def summary(self) -> str:
        return "\n".join(f"{kind:8} P {s.precision:.3f}  R {s.recall:.3f}  F1 {s.f1:.3f}  "
                         f"(gold {s.gold}, predicted {s.predicted}, unmasked chars {s.unmasked_chars}/{s.gold_chars})"
                         for kind in ("person", "location", "any") for s in [self[kind]])


def _overlap(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def _checked(spans: Iterable[Span], text: str, passage_id: str) -> list[Span]:
    out = []
    for start, end, kind in spans:
        if kind not in KINDS:
            raise ValueError(f"{passage_id}: predicted kind {kind!r} is not one of {KINDS}")
        if not 0 <= start < end <= len(text):
            raise ValueError(f"{passage_id}: predicted span [{start}:{end}] is outside the text (0..{len(text)})")
        out.append((start, end, kind))
    return out


def score(predict: Callable[[str], Iterable[Span]]) -> Scores:
    """Mention-level precision, recall and F1 per kind of `predict` over every passage, with overlap matching (see
    the module doc), and the characters of gold mentions it leaves unmasked."""
    counts = {kind: [0] * 6 for kind in (*KINDS, "any")}
    misses: list[tuple[str, Mention]] = []
    false_positives: list[tuple[str, int, int, str, str]] = []
    for passage, text in passages():
        spans = _checked(predict(text), text, passage.id)
        masked = bytearray(len(text))
        for start, end, _ in spans:
            masked[start:end] = b"\x01" * (end - start)
        for kind in (*KINDS, "any"):
            gold = [m for m in passage.mentions if kind in ("any", m.kind)]
            pred = [s for s in spans if kind in ("any", s[2])]
            found = [m for m in gold if any(_overlap(m.start, m.end, s, e) for s, e, _ in pred)]
            correct = [(s, e, k) for s, e, k in pred if any(_overlap(m.start, m.end, s, e) for m in gold)]
            c = counts[kind]
            c[0] += len(gold)
            c[1] += len(pred)
            c[2] += len(found)
            c[3] += len(correct)
            c[4] += sum(m.end - m.start for m in gold)
            c[5] += sum(m.end - m.start - sum(masked[m.start:m.end]) for m in gold)
            if kind != "any":
                misses += [(passage.id, m) for m in gold if m not in found]
                false_positives += [(passage.id, s, e, k, text[s:e]) for s, e, k in pred if (s, e, k) not in correct]
    person, location, any_kind = (KindScores(*counts[kind]) for kind in (*KINDS, "any"))
    return Scores(person, location, any_kind, tuple(misses), tuple(false_positives))


PLACEHOLDER = re.compile(r"<(EMAIL|IP_ADDRESS|PHONE|CREDIT_CARD|IBAN|PERSON|LOCATION)>")
NAME_KINDS = {"PERSON": "person", "LOCATION": "location"}


def name_masks(block: PIIMasker) -> Callable[[str], list[tuple[int, int, str]]]:
    """The (start, end, kind) of every <PERSON> and <LOCATION> the block writes into a text, in the original."""
    import polars as pl

    def predict(text: str) -> list[tuple[int, int, str]]:
        after = block.apply(pl.DataFrame({"text": [text]}))[0]["text"][0]
        parts = PLACEHOLDER.split(after)
        aligned = re.fullmatch("(.+?)".join(re.escape(p) for p in parts[0::2]), text, re.DOTALL)
        assert aligned, after
        return [(*aligned.span(i + 1), NAME_KINDS[kind]) for i, kind in enumerate(parts[1::2]) if kind in NAME_KINDS]
    return predict
