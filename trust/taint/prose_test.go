package taint

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// proseGen writes ordinary English prose from a fixed vocabulary and
// grammatical templates, deterministically from its seed. Two generators with
// different seeds write different text over the same words and the same
// stock phrases, which is what the false-positive tests need: unrelated
// documents that still share a language.
type proseGen struct {
	rng *rand.Rand
}

func newProseGen(seed uint64) *proseGen {
	return &proseGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

var (
	nouns = strings.Fields(`
account accident address advantage advice agency agreement aircraft airport album
analysis animal answer apartment appearance application approach area argument army
article artist aspect assessment assignment association atmosphere attempt attention audience
author authority balance bank barrier basis battle beach bedroom behaviour benefit
bicycle bird birthday blanket board boat body bottle boundary branch
bread breakfast bridge brother budget building business cabinet camera campaign
candidate capacity capital career carpet castle category ceiling celebration century
chain chairman challenge champion channel chapter character chart chemistry chicken
childhood church circle citizen claim classroom climate clinic clock coach
coast coffee collection college colour column comment committee community company
comparison competition complaint computer concept concert condition conference confidence connection
consequence construction consumer contest context contract contribution conversation cottage council
country courage court cousin creature crisis criticism crowd culture currency
customer cycle damage database daughter debate decade decision definition delivery
demand department deposit description design desire detail development device diagram
difference dinner direction director discipline discussion disease distance district doctor
document driver economy edition editor education effect effort election element
emergency emotion employee energy engine engineer entrance environment equipment error
estate evening event evidence examination example exercise exhibition experience experiment
expert explanation expression factory failure family farmer feature festival field
figure finding fishing flight floor flower football forest fortune foundation
framework freedom friendship function funding furniture future garage garden generation
gift government grandmother guidance guitar habit harbour harvest health heart
highway historian history holiday hospital household hunger husband identity illness
image impact improvement incident income industry infection inflation influence information
initiative injury insect inspection instance institution instrument insurance intention interest
interview introduction investment island journey judge kitchen knowledge laboratory lake
landscape language lawyer leader lecture legend library licence lifestyle literature
location machine magazine management manager manufacturer market marriage material meadow
measure medicine meeting member memory message method microscope midnight mirror
mission mixture moment monitor mountain movement museum musician mystery neighbour
network newspaper novel obligation ocean office officer opinion opportunity orchestra
organisation outcome owner package painting palace parent parliament partner passenger
patience pattern payment peninsula performance period permission person perspective phenomenon
philosophy photograph physician piano picture pilot planet platform player poem
poet policy politician pollution population portrait possession potato poverty practice
preference presence president pressure principle priority prison procedure process producer
product profession professor profit programme progress project property proposal protection
province publication purpose quality quantity question railway reaction reader reality
recipe recognition recommendation record recovery reduction reference reflection region regulation
relationship religion replacement report reputation request research resident resolution resource
response responsibility restaurant result revenue revolution river road role routine
salary sample satisfaction scale scene schedule scheme scholar science scientist
season secretary sector security selection seminar sentence sequence series service
settlement shelter shoulder signal silence sister situation skill society soldier
solution song source speaker species speech sport stadium standard statement
station statue strategy stream street strength structure student studio subject
suggestion summer supermarket supply surface survey system teacher technique technology
telephone television temperature tension territory theatre theory thought threat tourist
tradition traffic training transport treatment trial tribe trouble truck tunnel
uncle union university valley variety vegetable vehicle version victory village
violence visitor volume volunteer voyage wealth weather website wedding weekend
welfare wilderness window winter witness worker workshop writer yard youth`)

	adjectives = strings.Fields(`
able absent academic accurate active actual additional adequate afraid ancient
angry annual anxious apparent appropriate arbitrary asleep attractive automatic available
aware basic beautiful bitter brave brief bright brilliant broad busy
calm capable careful central certain cheap chemical chief civil classic
clean clever cold colourful comfortable commercial common competitive complete complex
confident conscious conservative considerable consistent constant contemporary convenient correct creative
critical crucial cultural curious current dangerous dark decent deep definite
delicate democratic dense detailed different difficult digital direct distant domestic
dramatic dry due eager early eastern economic educational effective efficient
elderly electric elegant emotional empty enormous entire environmental equal essential
eventual evident exact excellent excessive exciting existing expensive experimental external
extraordinary fair familiar famous fancy fantastic fascinating favourite federal financial
flat flexible foreign formal former fortunate frequent fresh friendly full
fundamental funny generous gentle genuine global golden gradual grateful great
green grey guilty handsome happy hard harsh healthy heavy helpful
hidden historic honest horrible huge humble hungry ideal identical immediate
immense important impressive incredible independent individual industrial inevitable informal initial
innocent intelligent intense interesting internal international invisible joint junior keen
large late legal liberal lively local logical lonely long loud
lovely loyal lucky magnificent main major male marvellous massive mature
medical mental mild military minimal minor modern modest moral multiple
mutual narrow national native natural nearby neat necessary negative nervous
neutral noble normal notable numerous obvious occasional odd official open
opposite optimistic ordinary organic original outstanding overall painful pale parallel
partial particular passive patient peaceful perfect permanent personal physical plain
pleasant poor popular positive possible powerful practical precious precise pregnant
present previous primary private probable productive professional profound prominent proper
proud public pure quick quiet radical random rapid rare raw
ready realistic reasonable recent regional regular relevant reliable religious remarkable
remote rich rigid rough royal rural sacred safe satisfactory scientific
secondary secret secure senior sensible sensitive separate serious severe sharp
shy significant silent silly similar simple sincere slight slow small
smooth social soft solid sophisticated southern spare special specific splendid
stable steady steep strange strict strong structural stupid subsequent substantial
subtle successful sudden sufficient suitable superb sure surprising suspicious sweet
swift technical temporary tender terrible thick thin thorough tidy tiny
total tough traditional tremendous tropical typical ugly unable unusual upper
urban urgent useful usual vague valuable various vast visible vital
vivid vulnerable warm weak wealthy weekly western wet whole wide
wild wise wonderful wooden worried young`)

	adverbs = strings.Fields(`
actually almost already always apparently carefully certainly clearly closely commonly
completely constantly currently deeply definitely deliberately directly easily effectively entirely
equally especially essentially eventually exactly extremely fairly finally firmly frequently
fully gently gradually greatly hardly heavily highly honestly immediately increasingly
largely literally mainly merely mostly naturally nearly necessarily normally obviously
occasionally openly originally particularly partly perfectly personally possibly potentially previously
primarily probably properly quickly quietly rapidly rarely readily really recently
regularly relatively reportedly roughly seriously significantly silently simply slightly slowly
smoothly specifically steadily strongly suddenly surely surprisingly typically ultimately usually
virtually widely`)

	// verbs are transitive verbs; irregular pasts are given as base:past.
	verbs = strings.Fields(`
accept achieve acquire adapt address adjust admire adopt advise affect
analyse announce anticipate appreciate approve arrange assess assume attract avoid
begin:began bring:brought build:built buy:bought catch:caught celebrate challenge change choose:chose clarify
collect combine compare complete consider construct contain continue control convince
create criticise cultivate defend define deliver demonstrate describe design destroy
develop discover discuss display distribute document draw:drew earn embrace emphasise
encounter encourage enjoy ensure establish estimate evaluate examine expand expect
explain explore express extend face find:found finish follow forget:forgot gather
generate grow:grew handle highlight identify ignore illustrate imagine improve include
increase influence inform inherit inspect inspire install introduce investigate join
keep:kept know:knew launch lead:led learn leave:left limit maintain manage measure
mention modify monitor notice observe obtain offer organise overcome:overcame paint
perform plan:planned postpone predict prefer:preferred prepare present preserve prevent produce promote
protect provide publish pursue question raise reach receive recognise recommend
record reduce reflect reject release remember remove repair replace represent
require rescue research reveal review revise satisfy secure seek:sought select
share shape simplify solve study:studied suggest support surprise survey sustain
teach:taught test threaten tolerate track train transform translate treat understand:understood
update use value verify visit watch welcome win:won witness write:wrote`)

	names = strings.Fields(`
Alice Bruno Chiara Dmitri Elena Farid Grace Hiroshi Ingrid Jamal
Katarina Liam Mei Nadia Oscar Priya Quentin Rosa Samuel Tomas
Ursula Victor Wen Ximena Yusuf Zara Anders Beatriz Callum Daniela
Emeka Fiona Gustavo Hannah Ivan Julia Kenji Leila Marco Noor`)

	places = strings.Fields(`
Amsterdam Bergen Cairo Dublin Edinburgh Florence Geneva Hamburg Istanbul Jakarta
Kyoto Lisbon Madrid Nairobi Oslo Porto Quebec Rotterdam Seville Toronto
Uppsala Valencia Warsaw Yokohama Zurich Adelaide Bologna Cardiff Dresden Glasgow`)

	prepositions = strings.Fields(`
about above across after against along among around at before behind below beside
between beyond by during for from in inside near of on over through throughout to
toward under until upon with within without`)

	openers = []string{
		"", "", "", "", "", "", "However, ", "Moreover, ", "In addition, ", "Meanwhile, ",
		"As a result, ", "For example, ", "For instance, ", "In other words, ", "Nevertheless, ",
		"At the same time, ", "On the other hand, ", "In recent years, ", "According to the report, ",
		"It is important to note that ", "There is no doubt that ", "As a matter of fact, ",
		"Last but not least, ", "In the long run, ", "From time to time, ", "To make a long story short, ",
		"It goes without saying that ", "Not surprisingly, ", "Later that year, ", "By the end of the decade, ",
	}

	stock = []string{
		"one of the most important", "the vast majority of", "a wide range of", "a great deal of",
		"the rest of the", "at the end of the day", "in the middle of the", "for the first time in years",
		"as well as", "more and more", "in spite of the", "on behalf of the", "with respect to the",
		"in accordance with the", "in the context of", "at the beginning of the", "for the sake of",
	}

	closers = []string{
		"For more information, please visit our website.",
		"All rights reserved.",
		"Thank you for reading, and see you next time.",
		"Please contact us if you have any questions.",
		"Sign up for our newsletter to receive the latest updates.",
		"This article was last updated last week.",
	}

	determiners = []string{"the", "the", "the", "a", "this", "that", "every", "each", "another", "their", "its", "our"}
	pluralDets  = []string{"the", "the", "many", "several", "some", "most", "these", "those", "few", "their", "our", "all the"}
	subjects    = []string{"we", "they", "he", "she", "the team", "the committee", "the researchers", "the authors", "many people", "nobody"}
	auxiliaries = []string{"will", "would", "could", "should", "might", "must", "can", "may", "did not", "will not"}
	reporting   = []string{"said", "argued", "claimed", "suggested", "noted", "believed", "explained", "admitted", "insisted", "reported"}
	quantities  = []string{"two", "three", "four", "five", "six", "seven", "ten", "twelve", "dozens of", "hundreds of", "thousands of"}
)

func (g *proseGen) pick(list []string) string { return list[g.rng.IntN(len(list))] }

func (g *proseGen) noun() string { return g.pick(nouns) }

func plural(n string) string {
	switch {
	case strings.HasSuffix(n, "y") && !strings.ContainsAny(n[len(n)-2:len(n)-1], "aeiou"):
		return n[:len(n)-1] + "ies"
	case strings.HasSuffix(n, "s"), strings.HasSuffix(n, "x"), strings.HasSuffix(n, "ch"), strings.HasSuffix(n, "sh"):
		return n + "es"
	case n == "person":
		return "people"
	case n == "phenomenon":
		return "phenomena"
	case n == "criterion":
		return "criteria"
	case n == "crisis":
		return "crises"
	case n == "analysis":
		return "analyses"
	}
	return n + "s"
}

func verbBase(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		return v[:i]
	}
	return v
}

func verbPast(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		return v[i+1:]
	}
	switch {
	case strings.HasSuffix(v, "e"):
		return v + "d"
	case strings.HasSuffix(v, "y") && !strings.ContainsAny(v[len(v)-2:len(v)-1], "aeiou"):
		return v[:len(v)-1] + "ied"
	}
	return v + "ed"
}

func verbThird(v string) string {
	b := verbBase(v)
	switch {
	case strings.HasSuffix(b, "y") && !strings.ContainsAny(b[len(b)-2:len(b)-1], "aeiou"):
		return b[:len(b)-1] + "ies"
	case strings.HasSuffix(b, "s"), strings.HasSuffix(b, "x"), strings.HasSuffix(b, "ch"), strings.HasSuffix(b, "sh"):
		return b + "es"
	}
	return b + "s"
}

// nounPhrase is a determiner, maybe an adjective, and a noun, singular or
// plural.
func (g *proseGen) nounPhrase() string {
	var b strings.Builder
	if g.rng.IntN(3) == 0 {
		b.WriteString(g.pick(pluralDets))
		b.WriteByte(' ')
		if g.rng.IntN(2) == 0 {
			b.WriteString(g.pick(adjectives))
			b.WriteByte(' ')
		}
		b.WriteString(plural(g.noun()))
		return b.String()
	}
	det := g.pick(determiners)
	adj := ""
	if g.rng.IntN(2) == 0 {
		adj = g.pick(adjectives)
	}
	if det == "a" {
		first := g.noun()
		if adj != "" {
			first = adj
		}
		if strings.ContainsAny(first[:1], "aeiou") {
			det = "an"
		}
	}
	b.WriteString(det)
	b.WriteByte(' ')
	if adj != "" {
		b.WriteString(adj)
		b.WriteByte(' ')
	}
	b.WriteString(g.noun())
	return b.String()
}

func (g *proseGen) prepPhrase() string {
	return g.pick(prepositions) + " " + g.nounPhrase()
}

// sentence writes one sentence from a random template.
func (g *proseGen) sentence() string {
	var s string
	switch g.rng.IntN(14) {
	case 0:
		s = g.nounPhrase() + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase() + " " + g.prepPhrase()
	case 1:
		s = g.pick(names) + " " + g.pick(reporting) + " that " + g.nounPhrase() + " " + g.pick(auxiliaries) + " " +
			verbBase(g.pick(verbs)) + " " + g.nounPhrase() + " " + g.pick(adverbs)
	case 2:
		s = "In " + strconv.Itoa(1900+g.rng.IntN(125)) + ", " + g.nounPhrase() + " of " + g.pick(places) + " " +
			verbPast(g.pick(verbs)) + " " + g.pick(quantities) + " " + plural(g.noun())
	case 3:
		s = g.pick(subjects) + " " + g.pick(adverbs) + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase() +
			", but " + g.nounPhrase() + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase()
	case 4:
		s = g.nounPhrase() + " " + g.pick([]string{"was", "seemed", "remained", "became", "looked"}) + " " +
			g.pick(adjectives) + " and " + g.pick(adjectives) + " " + g.prepPhrase()
	case 5:
		s = g.pick(stock) + " " + plural(g.noun()) + " " + verbBase(g.pick(verbs)) + " " + g.nounPhrase() + " " + g.prepPhrase()
	case 6:
		s = "When " + g.nounPhrase() + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase() + ", " +
			g.pick(subjects) + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase()
	case 7:
		s = "The " + g.noun() + " " + verbThird(g.pick(verbs)) + " " + g.nounPhrase() + " " + g.prepPhrase() +
			" and " + verbThird(g.pick(verbs)) + " " + g.nounPhrase()
	case 8:
		s = g.pick(names) + " and " + g.pick(names) + " " + verbPast(g.pick(verbs)) + " " + g.nounPhrase() +
			" in " + g.pick(places) + " " + g.prepPhrase()
	case 9:
		s = "Although " + g.nounPhrase() + " was " + g.pick(adjectives) + ", " + g.pick(subjects) + " " +
			g.pick(auxiliaries) + " " + verbBase(g.pick(verbs)) + " " + g.nounPhrase()
	case 10:
		s = "There " + g.pick([]string{"were", "are", "will be", "might be"}) + " " + g.pick(quantities) + " " +
			g.pick(adjectives) + " " + plural(g.noun()) + " " + g.prepPhrase()
	case 11:
		s = g.pick(subjects) + " " + g.pick(auxiliaries) + " " + verbBase(g.pick(verbs)) + " " + g.pick(stock) + " " +
			plural(g.noun()) + " " + g.prepPhrase()
	case 12:
		s = "Why " + g.pick([]string{"did", "would", "should", "could"}) + " " + g.nounPhrase() + " " +
			verbBase(g.pick(verbs)) + " " + g.nounPhrase() + "?"
		return capitalise(s)
	default:
		s = g.nounPhrase() + ", " + g.pick(names) + " " + g.pick(reporting) + ", " + g.pick([]string{"is", "was"}) + " " +
			g.pick(adverbs) + " " + g.pick(adjectives) + " " + g.prepPhrase()
	}
	return capitalise(g.pick(openers)+s) + "."
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// paragraph writes 3 to 7 sentences.
func (g *proseGen) paragraph() string {
	n := 3 + g.rng.IntN(5)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = g.sentence()
	}
	return strings.Join(parts, " ")
}

// page writes a fetched web page as an agent sees it after HTML is
// stripped: a title, a few paragraphs and, often, site boilerplate.
func (g *proseGen) page() string {
	var b strings.Builder
	b.WriteString(capitalise(g.pick(adjectives)) + " " + plural(g.noun()) + " " + g.prepPhrase() + "\n\n")
	for i := 2 + g.rng.IntN(4); i > 0; i-- {
		b.WriteString(g.paragraph())
		b.WriteString("\n\n")
	}
	if g.rng.IntN(2) == 0 {
		b.WriteString(g.pick(closers))
		b.WriteString("\n")
	}
	return b.String()
}
