package mem_test

import (
	"testing"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/mem"
)

func TestStore(t *testing.T) {
	eventlogtest.Run(t, func(*testing.T) eventlog.Store { return &mem.Store{} })
}
