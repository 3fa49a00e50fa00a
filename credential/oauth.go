package credential

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
)

// OAuthConfig configures mode "oauth".
type OAuthConfig struct{}

// Flows runs the per-user authorizations of mode "oauth".
type Flows struct{}

// userOAuth obtains a principal's token by the authorization code flow.
type userOAuth struct{}

func newUserOAuth(string, *OAuthConfig, *Flows, zerolog.Logger) (*userOAuth, error) {
	return nil, errors.New("credential: mode oauth is not built yet")
}

func (o *userOAuth) obtain(context.Context, *handle, *Call) (*token, error) {
	return nil, errors.New("no")
}
func (o *userOAuth) renew(context.Context, *handle, *token) (*token, error) {
	return nil, errors.New("no")
}
