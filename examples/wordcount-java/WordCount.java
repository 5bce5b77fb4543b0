// Word count as a Java MapReduce job (Hadoop's old "mapred" API): the mapper and the
// reducer of examples/wordcount-java.json. Build: see README "MapReduce actions".
package org.example;

import java.io.IOException;
import java.util.Iterator;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapred.MapReduceBase;
import org.apache.hadoop.mapred.Mapper;
import org.apache.hadoop.mapred.OutputCollector;
import org.apache.hadoop.mapred.Reducer;
import org.apache.hadoop.mapred.Reporter;

public class WordCount {
    private static final Pattern WORD = Pattern.compile("[a-z]+(?:'[a-z]+)*");

    public static class Map extends MapReduceBase implements Mapper<LongWritable, Text, Text, IntWritable> {
        private static final IntWritable ONE = new IntWritable(1);
        private final Text word = new Text();

        public void map(LongWritable offset, Text line, OutputCollector<Text, IntWritable> out, Reporter reporter)
                throws IOException {
            Matcher m = WORD.matcher(line.toString().toLowerCase(Locale.ROOT));
            while (m.find()) {
                word.set(m.group());
                out.collect(word, ONE);
            }
        }
    }

    public static class Sum extends MapReduceBase implements Reducer<Text, IntWritable, Text, IntWritable> {
        public void reduce(Text word, Iterator<IntWritable> counts, OutputCollector<Text, IntWritable> out,
                Reporter reporter) throws IOException {
            int total = 0;
            while (counts.hasNext()) {
                total += counts.next().get();
            }
            out.collect(word, new IntWritable(total));
        }
    }
}
