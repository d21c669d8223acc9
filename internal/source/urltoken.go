package source

// tokenUserLength is the length from which an http(s) URL's user that mixes
// letters and digits is taken for a token. Tokens given as the user are 40
// hex digits (GitHub's classic ones, Gitea's and Forgejo's) or longer; user
// names are words, and rarely this long with digits in them.
const tokenUserLength = 20

// userLooksLikeToken reports whether an http(s) URL's user is a token
// rather than a name: at least tokenUserLength letters, digits, '_' and
// '-', with both letters and digits. It catches the tokens that carry no
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
		case c == '_' || c == '-':
		default:
			return false
		}
	}
	return letter && digit
}
