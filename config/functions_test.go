package config

import "testing"

func TestLargestFormatWidth(t *testing.T) {
	tests := []struct {
		format string
		want   int
	}{
		{"", 0},
		{"plain", 0},
		{"%s", 0},
		{"%5s", 5},
		{"%-08.3f and %12d", 12},
		{"%[2]40s", 40},
		{"100%% %3d", 3},
		{"%99999999999999999999999s", maxFormatWidth + 1},
		{"%", 0},
		{"%[", 0},
		{"%-", 0},
	}
	for _, tt := range tests {
		if got := largestFormatWidth(tt.format); got != tt.want {
			t.Errorf("largestFormatWidth(%q) = %d, want %d", tt.format, got, tt.want)
		}
	}
}
