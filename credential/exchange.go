package credential

import (
	"context"
	"errors"
)

// ExchangeConfig configures mode "exchange" (RFC 8693).
type ExchangeConfig struct{}

// exchanger obtains a principal's token by token exchange.
type exchanger struct{}

func newExchanger(string, *ExchangeConfig) (*exchanger, error) {
	return nil, errors.New("credential: mode exchange is not built yet")
}

func (x *exchanger) obtain(context.Context, *handle, *Call) (*token, error) {
	return nil, errors.New("no")
}
func (x *exchanger) renew(context.Context, *handle, *token) (*token, error) {
	return nil, errors.New("no")
}
