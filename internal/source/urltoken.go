package source

// tokenUserLength is the length from which an http(s) URL's user made of
// letters and digits alone, with both in it, is taken for a token. Tokens
// given as the user are 40 hex digits (GitHub's classic ones, Gitea's and
// Forgejo's) or 52 characters (Azure DevOps); a user name that long with
// no '-' or '.' between its words is rare, and one with them is a name
// (build-bot-2024, contoso-engineering2024), which keeps working.
const tokenUserLength = 32

// userLooksLikeToken reports whether an http(s) URL's user is a token
// rather than a name: at least tokenUserLength letters, digits and '_',
// with both letters and digits. It catches the tokens that carry no
// known prefix, such as https://<40 hex digits>@gitea.example.com/....
func userLooksLikeToken(user string) bool {
	if len(user) < tokenUserLength {
		return false
	}
	var letter, digit bool
	for _, c := range user {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c == '_':
		default:
			return false
		}
	}
	return letter && digit
}
