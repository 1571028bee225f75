// PromText: each family's HELP and TYPE once, its series together in the order added even when
// sources interleave (a pool adds model by model), label values escaped, the special values
// spelled as the text format wants. server.metrics parses whole scrapes with prometheus_client.
#include <gtest/gtest.h>

#include <limits>

#include "server/prom-text.h"

namespace minfer::server {

TEST(PromText, FamiliesStayTogetherWhenSourcesInterleave) {
  PromText t;
  t.add("a_total", "counter", "A.", 1);
  t.add("b", "gauge", "B.", 2);
  t.add("a_total", "counter", "A.", 3, prom_label("model", "m"));
  t.add("b", "gauge", "B.", 4, prom_label("model", "m"));
  EXPECT_EQ(t.str(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 1\na_total{model=\"m\"} 3\n"
            "# HELP b B.\n# TYPE b gauge\nb 2\nb{model=\"m\"} 4\n");
}

TEST(PromText, DeclaredFamilyWithoutSeriesAndSuffixedSamples) {
  PromText t;
  t.declare("r_total", "counter", "R.");
  t.sample("h", "histogram", "H.", "_bucket", prom_join(prom_label("model", "m"), "le=\"+Inf\""), 2);
  t.sample("h", "histogram", "H.", "_sum", "", 0.5);
  EXPECT_EQ(t.str(), "# HELP r_total R.\n# TYPE r_total counter\n"
                     "# HELP h H.\n# TYPE h histogram\nh_bucket{model=\"m\",le=\"+Inf\"} 2\nh_sum 0.5\n");
}

TEST(PromText, LabelValuesEscapedAndSpecialValues) {
  EXPECT_EQ(prom_label("model", "a\"b\\c\nd"), "model=\"a\\\"b\\\\c\\nd\"");
  EXPECT_EQ(prom_join("", "x=\"1\""), "x=\"1\"");
  EXPECT_EQ(prom_join("x=\"1\"", ""), "x=\"1\"");
  PromText t;
  t.add("v", "gauge", "V.", std::numeric_limits<double>::infinity());
  t.add("v", "gauge", "V.", -std::numeric_limits<double>::infinity(), "k=\"1\"");
  t.add("v", "gauge", "V.", std::numeric_limits<double>::quiet_NaN(), "k=\"2\"");
  t.add("v", "gauge", "V.", 1234567, "k=\"3\"");
  EXPECT_EQ(t.str(), "# HELP v V.\n# TYPE v gauge\nv +Inf\nv{k=\"1\"} -Inf\nv{k=\"2\"} NaN\nv{k=\"3\"} 1234567\n");
}

}  // namespace minfer::server
